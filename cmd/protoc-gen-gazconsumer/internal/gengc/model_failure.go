package gengc

import (
	"time"

	"google.golang.org/protobuf/compiler/protogen"

	gcv1 "github.com/gazconsumer/gazconsumer/proto/gazconsumer/v1"
)

// Paths within the failure policy options, by field number.
const (
	optOnFailure        = 7 // Consumer.on_failure
	optHandlerOnFailure = 1 // Handler.on_failure
	optRetries          = 1 // FailurePolicy.retries
	optBackoff          = 2 // FailurePolicy.backoff
	optMaxBackoff       = 3 // FailurePolicy.max_backoff
	optThen             = 4 // FailurePolicy.then
)

// maxRetries bounds FailurePolicy.retries: retries are bounded by the
// transaction's duration anyway, and a larger count is a mistake.
const maxRetries = 1000

// handlerOptions returns the (gazconsumer.v1.handler) option of m, or nil.
func handlerOptions(m *protogen.Method) *gcv1.Handler {
	return optionOf[*gcv1.Handler](m.Desc, gcv1.E_Handler)
}

// handlerErrorf returns an error positioned at path within the
// (gazconsumer.v1.handler) option of m.
func handlerErrorf(m *protogen.Method, path []int32, format string, args ...any) error {
	return errorAt(extPos(m.Desc, methodOptionsField, int32(gcv1.E_Handler.Field), path...), format, args...)
}

// checkHandlerOptions fails if an rpc of s, which is not a consumer, has a
// (gazconsumer.v1.handler) option.
func checkHandlerOptions(s *protogen.Service) error {
	for _, m := range s.Methods {
		if handlerOptions(m) != nil {
			return handlerErrorf(m, nil, "rpc %s has option (gazconsumer.v1.handler), but service %s is not a consumer (option (gazconsumer.v1.consumer))",
				m.Desc.Name(), s.Desc.Name())
		}
	}
	return nil
}

// failurePolicy is a checked FailurePolicy annotation.
type failurePolicy struct {
	retries             uint32
	backoff, maxBackoff time.Duration
	deadLetter          bool
}

// checkFailurePolicy checks fp, the policy of what (for errors), whose
// errors errAt positions at a path within the policy.
func checkFailurePolicy(fp *gcv1.FailurePolicy, what string, errAt func(path []int32, format string, args ...any) error) (*failurePolicy, error) {
	if fp == nil {
		return nil, nil
	}
	out := &failurePolicy{retries: fp.GetRetries()}
	if out.retries > maxRetries {
		return nil, errAt(at(optRetries), "on_failure of %s: retries %d is more than %d", what, out.retries, maxRetries)
	}
	for _, d := range []struct {
		name string
		path int32
		v    interface {
			CheckValid() error
			AsDuration() time.Duration
		}
		set bool
		to  *time.Duration
	}{
		{"backoff", optBackoff, fp.GetBackoff(), fp.Backoff != nil, &out.backoff},
		{"max_backoff", optMaxBackoff, fp.GetMaxBackoff(), fp.MaxBackoff != nil, &out.maxBackoff},
	} {
		if !d.set {
			continue
		} else if err := d.v.CheckValid(); err != nil {
			return nil, errAt(at(d.path), "on_failure of %s: %s: %v", what, d.name, err)
		} else if *d.to = d.v.AsDuration(); *d.to <= 0 {
			return nil, errAt(at(d.path), "on_failure of %s: %s must be positive, not %v", what, d.name, *d.to)
		}
	}
	if fp.Backoff != nil && fp.MaxBackoff != nil && out.maxBackoff < out.backoff {
		return nil, errAt(at(optMaxBackoff), "on_failure of %s: max_backoff %v is less than backoff %v", what, out.maxBackoff, out.backoff)
	}
	switch fp.GetThen() {
	case gcv1.FailureAction_FAILURE_ACTION_UNSPECIFIED, gcv1.FailureAction_FAILURE_ACTION_FAIL:
	case gcv1.FailureAction_FAILURE_ACTION_DEAD_LETTER:
		out.deadLetter = true
	default:
		return nil, errAt(at(optThen), "on_failure of %s: then: %d is not a value of %s", what, fp.GetThen(),
			gcv1.FailureAction(0).Descriptor().FullName())
	}
	if (fp.Backoff != nil || fp.MaxBackoff != nil) && out.retries == 0 {
		return nil, errAt(at(optRetries), "on_failure of %s: a backoff without retries waits for nothing (set retries)", what)
	}
	return out, nil
}

// failurePolicies checks the failure policies of consumer c: its own, and
// its handlers'.
func failurePolicies(c *consumer) error {
	s := c.svc
	var err error
	c.onFailure, err = checkFailurePolicy(c.opts.GetOnFailure(), "consumer "+string(s.Desc.Name()),
		func(path []int32, format string, args ...any) error {
			return optErrorf(s.Desc, append(at(optOnFailure), path...), format, args...)
		})
	if err != nil {
		return err
	}
	for i := range c.handlers {
		h := &c.handlers[i]
		m := h.method
		h.onFailure, err = checkFailurePolicy(handlerOptions(m).GetOnFailure(), "rpc "+string(m.Desc.Name()),
			func(path []int32, format string, args ...any) error {
				return handlerErrorf(m, append(at(optHandlerOnFailure), path...), format, args...)
			})
		if err != nil {
			return err
		}
	}
	return nil
}

// expiryMethod returns the name of the optional method of a handler told of
// the rows of table t that expire.
func expiryMethod(t *table) string { return "OnExpire" + t.msg.GoIdent.GoName }

// checkExpiryHandlers fails if an rpc of c is named as the optional method
// told of the rows of one of its tables that expire: the handler could not
// have both.
func checkExpiryHandlers(c *consumer) error {
	for _, t := range c.tables {
		if t.ttl == 0 {
			continue
		}
		for _, h := range c.handlers {
			if h.method.GoName == expiryMethod(t) {
				return errorf(h.method.Desc, "rpc %s is named as the method %s of the handler, told of the rows of table %s that expire (its ttl)",
					h.method.Desc.Name(), expiryMethod(t), t.msg.Desc.FullName())
			}
		}
	}
	return nil
}
