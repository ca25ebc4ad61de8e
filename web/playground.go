package web

import (
	"net/http"

	"github.com/julienschmidt/httprouter"
)

// Stubs until the playground lands.

func (s *Server) playground(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	s.errorPage(w, r, http.StatusNotFound)
}

func (s *Server) playgroundStart(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	s.errorPage(w, r, http.StatusNotFound)
}

func (s *Server) playgroundResume(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	s.errorPage(w, r, http.StatusNotFound)
}

func (s *Server) playgroundInput(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	s.errorPage(w, r, http.StatusNotFound)
}
