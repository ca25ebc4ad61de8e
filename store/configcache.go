package store

import (
	"bytes"
	"sync"

	"github.com/turnstile-dev/turnstile/runtime"
)

// configCache keeps the last decoded definition of each configuration, so
// that a decision, which reads its run's configuration with the run, does
// not decode the same JSON again: the definition still comes with every
// read and is compared byte for byte, so an edit (config apply, from any
// process) is seen at the very next read. Each caller gets its own copy
// of the top-level struct; nothing in the engine writes to a
// configuration's maps or slices.
type configCache struct {
	mu sync.Mutex
	m  map[int64]decodedConfig
}

type decodedConfig struct {
	definition []byte
	cfg        runtime.Configuration
}

// maxCachedConfigs bounds the cache; past it, it starts again empty.
const maxCachedConfigs = 1000

// configuration is row.configuration(), decoded once per definition.
func (c *configCache) configuration(row configurationRow) (*runtime.Configuration, error) {
	c.mu.Lock()
	d, ok := c.m[row.ID]
	c.mu.Unlock()
	if ok && bytes.Equal(d.definition, row.Definition) {
		cfg := d.cfg
		cfg.Active = row.Active
		return &cfg, nil
	}
	cfg, err := row.configuration()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxCachedConfigs {
		c.m = map[int64]decodedConfig{}
	}
	c.m[row.ID] = decodedConfig{definition: bytes.Clone(row.Definition), cfg: *cfg}
	c.mu.Unlock()
	return cfg, nil
}
