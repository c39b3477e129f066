package table

// NewEncoder returns a Codec appending the first n fields passed to it to b.
func NewEncoder(b []byte, n int) *Codec { return &Codec{b: b, n: n} }

// NewDecoder returns a Codec decoding the fields passed to it from b.
func NewDecoder(b []byte) *Codec { return &Codec{b: b, decode: true} }

// Bytes returns what c encoded, or what it has left to decode.
func (c *Codec) Bytes() []byte { return c.b }

// Err returns the error of c's decoding.
func (c *Codec) Err() error { return c.err }
