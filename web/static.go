package web

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed static
var static embed.FS

// staticFiles serves the embedded scripts and style sheet under /static/.
func staticFiles() http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree always has static/
	}
	return http.StripPrefix("/static/", http.FileServerFS(sub))
}
