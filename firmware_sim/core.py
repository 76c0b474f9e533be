"""The discrete-event clock: a heap of (time, priority, sequence, event).

In the spirit of SimPy's core, written plainly for pyembed:

* time is an integer count of CPU cycles; nothing is a float, so runs are exact;
* ``Environment.step()`` pops the earliest event and runs its callbacks;
  ties break by priority, then first-in first-out (the sequence number), so the
  same inputs always give the same trace;
* a process is a generator that yields events and is resumed with their value
  when they fire (``yield env.timeout(100)``, ``yield dma_done``);
* an event that fails with nobody waiting on it stops the run loudly: its
  exception propagates out of ``run()``.

The firmware runtime (firmware_sim.sim), the DMA engine (firmware_sim.dma) and
the periodic scheduler are all processes on one Environment.
"""
import heapq

URGENT = 0   # resumptions of processes, scheduled before ordinary events at the same cycle
NORMAL = 1

_PENDING = object()


class Event:
    """Something that happens at one cycle. Callbacks run when it is processed."""

    def __init__(self, env, name=None):
        self.env = env
        self.name = name
        self.callbacks = []
        self._value = _PENDING
        self.ok = True
        self.defused = False     # a failure somebody handled (a process caught it)
        self.processed = False

    @property
    def triggered(self):
        return self._value is not _PENDING

    @property
    def value(self):
        if self._value is _PENDING:
            raise RuntimeError(f"event {self.name!r} has no value yet")
        return self._value

    def succeed(self, value=None, delay=0, priority=NORMAL):
        if self.triggered:
            raise RuntimeError(f"event {self.name!r} already triggered")
        self.ok = True
        self._value = value
        self.env.schedule(self, delay, priority)
        return self

    def fail(self, exception, delay=0, priority=NORMAL):
        if self.triggered:
            raise RuntimeError(f"event {self.name!r} already triggered")
        if not isinstance(exception, BaseException):
            raise TypeError(f"fail() needs an exception, got {exception!r}")
        self.ok = False
        self._value = exception
        self.env.schedule(self, delay, priority)
        return self

    def __repr__(self):
        state = "processed" if self.processed else ("triggered" if self.triggered else "pending")
        return f"<{type(self).__name__} {self.name or ''} {state}>"


class Timeout(Event):
    """An event that fires ``delay`` cycles from now."""

    def __init__(self, env, delay, value=None, name=None):
        delay = _cycles(delay, "delay")
        super().__init__(env, name or f"timeout({delay})")
        self.delay = delay
        self.ok = True
        self._value = value
        env.schedule(self, delay, NORMAL)


class Process(Event):
    """Runs a generator; the process itself is an event that fires with the
    generator's return value (or fails with its exception)."""

    def __init__(self, env, generator, name=None):
        if not hasattr(generator, "send") or not hasattr(generator, "throw"):
            raise TypeError(f"process() needs a generator, got {generator!r}")
        super().__init__(env, name or getattr(generator, "__name__", "process"))
        self._generator = generator
        self.target = None
        start = Event(env, f"start:{self.name}")
        start.callbacks.append(self._resume)
        start.succeed(priority=URGENT)

    @property
    def is_alive(self):
        return not self.triggered

    def _resume(self, event):
        while True:
            try:
                if event.ok:
                    target = self._generator.send(event.value)
                else:
                    event.defused = True
                    target = self._generator.throw(event.value)
            except StopIteration as stop:
                self.target = None
                self.succeed(stop.value, priority=URGENT)
                return
            except BaseException as exc:  # the process died: its waiters (or run()) see why
                self.target = None
                self.fail(exc, priority=URGENT)
                return
            if not isinstance(target, Event):
                exc = TypeError(f"process {self.name!r} yielded {target!r}, not an event")
                self._generator.close()
                self.fail(exc, priority=URGENT)
                return
            if target.processed:   # already happened: continue at once with its value
                event = target
                continue
            self.target = target
            target.callbacks.append(self._resume)
            return


class AllOf(Event):
    """Fires when every event in ``events`` has fired (value: list of their values);
    fails as soon as one of them fails."""

    def __init__(self, env, events, name=None):
        super().__init__(env, name or "all_of")
        self._events = list(events)
        self._left = 0
        for ev in self._events:
            if ev.processed:
                if not ev.ok:
                    ev.defused = True
                    self.fail(ev.value)
                    return
                continue
            self._left += 1
            ev.callbacks.append(self._check)
        if self._left == 0:
            self.succeed([ev.value for ev in self._events])

    def _check(self, ev):
        if self.triggered:
            if not ev.ok:
                ev.defused = True
            return
        if not ev.ok:
            ev.defused = True
            self.fail(ev.value)
            return
        self._left -= 1
        if self._left == 0:
            self.succeed([e.value for e in self._events])


class Resource:
    """``capacity`` identical units (e.g. DMA channels). ``request()`` returns an
    event that fires when a unit is granted; ``release()`` gives it back. Waiters
    are served first-come first-served."""

    def __init__(self, env, capacity, name="resource"):
        if int(capacity) < 1:
            raise ValueError(f"{name}: capacity must be >= 1, got {capacity}")
        self.env = env
        self.capacity = int(capacity)
        self.name = name
        self.users = 0
        self._waiting = []

    def request(self):
        ev = Event(self.env, f"request:{self.name}")
        if self.users < self.capacity:
            self.users += 1
            ev.succeed()
        else:
            self._waiting.append(ev)
        return ev

    def release(self):
        if self.users <= 0:
            raise RuntimeError(f"{self.name}: release() without a granted request")
        if self._waiting:
            self._waiting.pop(0).succeed()
        else:
            self.users -= 1


class Environment:
    """The clock and the event queue."""

    def __init__(self, start=0):
        self.now = _cycles(start, "start")
        self._queue = []
        self._seq = 0

    # --- building blocks -------------------------------------------------
    def event(self, name=None):
        return Event(self, name)

    def timeout(self, delay, value=None, name=None):
        return Timeout(self, delay, value, name)

    def process(self, generator, name=None):
        return Process(self, generator, name)

    def all_of(self, events, name=None):
        return AllOf(self, events, name)

    # --- the loop ----------------------------------------------------------
    def schedule(self, event, delay=0, priority=NORMAL):
        delay = _cycles(delay, "delay")
        heapq.heappush(self._queue, (self.now + delay, priority, self._seq, event))
        self._seq += 1

    def peek(self):
        """Cycle of the next event, or None when the queue is empty."""
        return self._queue[0][0] if self._queue else None

    def step(self):
        time, _prio, _seq, event = heapq.heappop(self._queue)
        self.now = time
        callbacks, event.callbacks = event.callbacks, []
        event.processed = True
        for cb in callbacks:
            cb(event)
        if not event.ok and not event.defused and not callbacks:
            raise event.value

    def run(self, until=None):
        """Process events until the queue is empty, until cycle ``until`` (an int),
        or until the event ``until`` has been processed (returns its value)."""
        if isinstance(until, Event):
            stop = until
            while not stop.processed:
                if not self._queue:
                    raise RuntimeError(f"no more events but {stop!r} has not happened (deadlock)")
                self.step()
            if not stop.ok:
                stop.defused = True
                raise stop.value
            return stop.value
        if until is not None:
            until = _cycles(until, "until")
            if until < self.now:
                raise ValueError(f"until={until} lies in the past (now={self.now})")
        while self._queue and (until is None or self._queue[0][0] <= until):
            self.step()
        if until is not None:
            self.now = until
        return None


def _cycles(value, what):
    """Time is whole cycles: accept ints (and integral numpy ints), reject the rest."""
    try:
        iv = int(value)
    except (TypeError, ValueError):
        raise TypeError(f"{what} must be an integer number of cycles, got {value!r}") from None
    if iv != value:
        raise TypeError(f"{what} must be an integer number of cycles, got {value!r}")
    if iv < 0:
        raise ValueError(f"{what} must be >= 0 cycles, got {iv}")
    return iv
