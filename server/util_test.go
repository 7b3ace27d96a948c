package server

import "sync/atomic"

type atomicBool struct{ b atomic.Bool }
