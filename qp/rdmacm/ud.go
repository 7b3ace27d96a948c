package rdmacm

import "context"

// acceptUD is filled in with UD support.
func (c *Conn) acceptUD(ctx context.Context, o *Options) error { return nil }
