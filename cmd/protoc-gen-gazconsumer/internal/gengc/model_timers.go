package gengc

import (
	"slices"

	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Paths within the options of timers, by field number.
const (
	optTimer    = 3 // MessageOptions.timer
	optTimerKey = 1 // Timer.key
	optTimers   = 8 // Consumer.timers
)

// timerPrefix begins the names of the schemas of timers, which tables'
// names then can't be.
const timerPrefix = "timer:"

// timer returns the timer annotation of m, as a table (the schema of its
// timers is a table's), or nil if it has none.
func (md *model) timer(m *protogen.Message) (*table, error) {
	if t, ok := md.timers[m.Desc.FullName()]; ok {
		return t, nil
	}
	mo := messageOptions(m)
	opts := mo.GetTimer()
	if opts == nil {
		return nil, nil
	} else if mo.GetJournal() != nil || mo.GetTable() != nil {
		return nil, optErrorf(m.Desc, at(optTimer), "timer message %s may not also be a journal message or a table", m.Desc.Name())
	} else if len(opts.GetKey()) == 0 {
		return nil, optErrorf(m.Desc, at(optTimer), "timer message %s has no key fields", m.Desc.Name())
	}
	t := &table{msg: m, name: timerPrefix + string(m.Desc.FullName()), timer: true}
	var err error
	if t.key, err = keyOf(m, opts.GetKey(), optTimer, optTimerKey); err != nil {
		return nil, err
	}
	md.timers[m.Desc.FullName()] = t
	return t, nil
}

// consumerTimers resolves the timers option of c.
func (md *model) consumerTimers(c *consumer) error {
	s := c.svc
	for i, name := range c.opts.GetTimers() {
		timerAt := at(optTimers, int32(i))
		m := md.resolve(s.Desc, name)
		if m == nil {
			return optErrorf(s.Desc, timerAt, "timer %q of consumer %s is not a known message", name, s.Desc.Name())
		}
		t, err := md.timer(m)
		if err != nil {
			return err
		} else if t == nil {
			return optErrorf(s.Desc, timerAt, "timer %q of consumer %s: message %s has no (gazconsumer.v1.message).timer option",
				name, s.Desc.Name(), m.Desc.FullName())
		} else if slices.Contains(c.timers, t) {
			return optErrorf(s.Desc, timerAt, "consumer %s lists timer %s twice", s.Desc.Name(), m.Desc.FullName())
		}
		c.timers = append(c.timers, t)
		c.timerAt = append(c.timerAt, i)
	}
	return nil
}

// timerHandler adds meth, taking timer t, as the handler of its firings.
func (c *consumer) timerHandler(meth *protogen.Method, t *table, byInput map[protoreflect.FullName]*protogen.Method) error {
	if !slices.Contains(c.timers, t) {
		return errorf(meth.Desc, "handler %s takes timer %s, which consumer %s does not list among its timers",
			meth.Desc.Name(), meth.Input.Desc.FullName(), c.svc.Desc.Name())
	} else if prev, ok := byInput[meth.Input.Desc.FullName()]; ok {
		return errorf(meth.Desc, "handlers %s and %s both take %s", prev.Desc.Name(), meth.Desc.Name(), meth.Input.Desc.FullName())
	} else if handlerOptions(meth) != nil {
		return handlerErrorf(meth, nil, "handler %s of timer %s has option (gazconsumer.v1.handler): the failure policies are of handlers of journal messages",
			meth.Desc.Name(), meth.Input.Desc.FullName())
	}
	byInput[meth.Input.Desc.FullName()] = meth
	c.timerHandlers = append(c.timerHandlers, handler{method: meth, timer: t})
	return nil
}

// checkTimerHandlers fails if a timer of c has no handler. (Timers, and
// rows that expire, follow their keys through a rescale: a rescalable
// consumer's timers must have owners, as its tables' rows, which package
// internal/ownership checks.)
func (c *consumer) checkTimerHandlers() error {
	for i, t := range c.timers {
		if !slices.ContainsFunc(c.timerHandlers, func(h handler) bool { return h.timer == t }) {
			return optErrorf(c.svc.Desc, at(optTimers, int32(c.timerAt[i])), "consumer %s sets timer %s, but no rpc of it takes %s to handle its firings",
				c.svc.Desc.Name(), t.msg.Desc.FullName(), t.msg.Desc.Name())
		}
	}
	return nil
}
