//! Linearizability checking of the histories the chaos workload records against
//! ProxmoxMachines kept in etcd by the API server.
//!
//! The algorithm is Wing & Gong's search with Lowe's memoization ("WGL"), the one Porcupine
//! implements: a depth-first search that linearizes the operations one at a time, in an
//! order real time allows, undoes the latest choice when it gets stuck, and remembers each
//! configuration (set of linearized operations, model state) it has explored so that none
//! is expanded twice. Linearizability is local (Herlihy & Wing): a history is linearizable
//! iff its restriction to each object is, so every key is searched on its own, which keeps
//! the searches small.
//!
//! The model is one versioned register per key. Requests that got no answer make it
//! nondeterministic: such a write may or may not have happened, and if it did, its
//! resourceVersion is not known. The search state is therefore the *set* of register states
//! the operations so far allow (the power-set construction of Porcupine's
//! `NondeterministicModel`), and an operation can be linearized iff that set stays non-empty.
//!
//! An operation that got no answer is linearized, if at all, anywhere after its call: its
//! return is at infinity, and its step has two outcomes, "no effect" and "took effect with
//! an unknown resourceVersion" (which a later read or CAS may reveal). Such reads say
//! nothing and are dropped. Such a write whose value a read returned (and which alone wrote
//! that value) is known to have taken effect before that read returned, and is checked so.
//!
//! A search that runs out of its share of the time budget leaves its key undecided.
//!
//! The workload is expected to write a fresh value each time: values are what identify the
//! write a read saw, and every write is assumed to change the object (so to get a new
//! resourceVersion).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// One client operation on one object, as the chaos workload recorded it.
#[derive(Clone, Debug)]
pub struct Operation {
    pub client: usize,
    /// Nanoseconds since the test began, when the request was sent.
    pub call: u64,
    /// When the answer arrived; None = no answer (timeout, connection reset, 5xx): the write
    /// may or may not have taken effect, at any time after `call`.
    pub ret: Option<u64>,
    pub key: String,
    pub input: Input,
    pub output: Output,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    Create {
        value: String,
    },
    Get,
    /// PUT carrying metadata.resourceVersion = expected (compare-and-swap).
    Update {
        expected: u64,
        value: String,
    },
    /// Merge patch without a precondition.
    Patch {
        value: String,
    },
    Delete,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// Create/Update/Patch succeeded; the object's new resourceVersion.
    Written {
        rv: u64,
    },
    /// Get (or one key of a list): the object's resourceVersion and value, or None = absent.
    Read(Option<(u64, String)>),
    Deleted,
    AlreadyExists,
    NotFound,
    Conflict,
    /// No answer (goes with ret = None).
    Unknown,
}

/// The outcome of [`check`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Linearizable,
    /// The operations on `key` have no linearization; `explanation` says where the search
    /// got stuck, for a human.
    Violation {
        key: String,
        explanation: String,
    },
    /// The search on `key` ran out of its share of the budget (no violation was found on the
    /// other keys).
    Undecided {
        key: String,
    },
}

/// Checks that `history` is linearizable, key by key.
///
/// Each key gets an equal share of what is left of `budget` when its turn comes, so time a
/// quick key does not use goes to the following ones. A violation on any key wins over an
/// undecided key (it is the more useful answer); otherwise the first undecided key, in key
/// order, is reported.
pub fn check(history: &[Operation], budget: Duration) -> Verdict {
    let start = Instant::now();
    let mut by_key: BTreeMap<&str, Vec<&Operation>> = BTreeMap::new();
    for op in history {
        // A read that got no answer constrains nothing: it may be linearized anywhere and
        // observes nothing.
        if op.input == Input::Get && op.output == Output::Unknown {
            continue;
        }
        by_key.entry(&op.key).or_default().push(op);
    }
    let keys = by_key.len();
    let mut undecided = None;
    for (checked, (key, ops)) in by_key.into_iter().enumerate() {
        let left = u32::try_from(keys - checked).unwrap_or(u32::MAX);
        let share = budget.saturating_sub(start.elapsed()) / left;
        // No deadline if the budget is too large to be represented as an instant.
        let deadline = Instant::now().checked_add(share);
        match check_key(&ops, deadline) {
            KeyResult::Linearizable => {}
            KeyResult::Violation(explanation) => {
                return Verdict::Violation {
                    key: key.to_owned(),
                    explanation,
                };
            }
            KeyResult::OutOfTime => {
                undecided.get_or_insert_with(|| key.to_owned());
            }
        }
    }
    match undecided {
        Some(key) => Verdict::Undecided { key },
        None => Verdict::Linearizable,
    }
}

// ---------------------------------------------------------------------------------------
// The model
// ---------------------------------------------------------------------------------------

/// A value, interned per key: register states are then small `Copy` values, cheap to clone,
/// hash and compare in the memo cache.
type ValueId = usize;

/// An operation's input with its value interned.
#[derive(Clone, Copy, Debug)]
enum Action {
    Create(ValueId),
    Get,
    Update { expected: u64, value: ValueId },
    Patch(ValueId),
    Delete,
}

/// An operation's output with its value interned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Written(u64),
    Read(Option<(u64, ValueId)>),
    Deleted,
    AlreadyExists,
    NotFound,
    Conflict,
    Unknown,
    /// No answer, but a read returned the value written: it took effect (see
    /// [`settle_observed`]), with an unknown resourceVersion.
    Applied,
}

#[derive(Clone, Copy, Debug)]
struct Step {
    action: Action,
    outcome: Outcome,
}

/// One possible state of a key.
///
/// (Fields in this order so that sorting brings together the states that differ only in
/// their floor, see [`apply`].)
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Register {
    object: Option<Object>,
    /// The largest resourceVersion known to have been assigned on this key so far in the
    /// linearization. resourceVersions are etcd revisions, globally increasing, so a write
    /// linearized after all those gets a larger one. A delete or an unanswered write also
    /// takes a revision, but an unknown one: not counting it only weakens the bound, which
    /// keeps the model sound (it never rejects what etcd could have done). With a known
    /// resourceVersion, the floor is that resourceVersion.
    floor: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Object {
    /// None: written by an operation whose answer was lost, so its resourceVersion is not
    /// known yet (only that it exceeds `floor`). A read reveals it.
    rv: Option<u64>,
    value: ValueId,
}

impl Register {
    /// Before the test, the object does not exist.
    const INITIAL: Register = Register {
        floor: 0,
        object: None,
    };

    /// The state after a write answered with `rv`.
    fn written(rv: u64, value: ValueId) -> Register {
        Register {
            floor: rv,
            object: Some(Object {
                rv: Some(rv),
                value,
            }),
        }
    }

    /// The state after an unanswered write that took effect: its resourceVersion is unknown.
    fn written_unknown(floor: u64, value: ValueId) -> Register {
        Register {
            floor,
            object: Some(Object { rv: None, value }),
        }
    }

    fn absent(floor: u64) -> Register {
        Register {
            floor,
            object: None,
        }
    }
}

/// Pushes onto `out` every state `step` can lead to from `r` (none if its output is
/// impossible there). An unknown output always allows "no effect": the request may never
/// have reached etcd, or have failed there (AlreadyExists, Conflict, NotFound).
fn successors(r: Register, step: Step, out: &mut Vec<Register>) {
    use Action as A;
    use Outcome as O;
    let floor = r.floor;
    match (step.action, r.object, step.outcome) {
        (A::Create(v), None, O::Written(rv)) if rv > floor => out.push(Register::written(rv, v)),
        (A::Create(_), Some(_), O::AlreadyExists) => out.push(r),
        (A::Create(v), None, O::Unknown) => {
            out.push(r);
            out.push(Register::written_unknown(floor, v));
        }
        (A::Create(v), None, O::Applied) | (A::Patch(v), Some(_), O::Applied) => {
            out.push(Register::written_unknown(floor, v));
        }

        (A::Get, None, O::Read(None)) => out.push(r),
        (A::Get, Some(o), O::Read(Some((rv, v)))) if o.value == v => match o.rv {
            Some(known) if known == rv => out.push(r),
            // The read reveals the resourceVersion of an unanswered write; etcd gave that
            // write a revision above every one before it.
            None if rv > floor => out.push(Register::written(rv, v)),
            _ => {}
        },

        (A::Update { expected, value }, Some(o), outcome) => {
            // Whether the object's resourceVersion can be `expected`, or can differ from it:
            // with an unknown one, both (it exceeds `floor`, nothing more is known).
            let may_match = o.rv.map_or(expected > floor, |rv| rv == expected);
            let may_differ = o.rv != Some(expected);
            match outcome {
                O::Written(rv) if may_match && rv > expected.max(floor) => {
                    out.push(Register::written(rv, value));
                }
                // Learning that an unknown resourceVersion is not `expected` is not recorded
                // (it could only prune a little).
                O::Conflict if may_differ => out.push(r),
                O::Unknown | O::Applied => {
                    if outcome == O::Unknown {
                        out.push(r);
                    }
                    if may_match {
                        // Taking effect means the old resourceVersion was `expected`.
                        out.push(Register::written_unknown(expected.max(floor), value));
                    }
                }
                _ => {}
            }
        }

        (A::Patch(v), Some(_), O::Written(rv)) if rv > floor => out.push(Register::written(rv, v)),
        (A::Patch(v), Some(_), O::Unknown) => {
            out.push(r);
            out.push(Register::written_unknown(floor, v));
        }

        (A::Delete, Some(_), O::Deleted) => out.push(Register::absent(floor)),
        (A::Delete, Some(_), O::Unknown) => {
            out.push(r);
            out.push(Register::absent(floor));
        }

        // Updates, patches and deletes of an absent object fail, or (unanswered) do nothing.
        (A::Update { .. } | A::Patch(_) | A::Delete, None, O::NotFound | O::Unknown) => {
            out.push(r);
        }
        // An unanswered create of an existing object, or an unanswered read, changes nothing.
        (A::Create(_), Some(_), O::Unknown) | (A::Get, _, O::Unknown) => out.push(r),
        _ => {}
    }
}

/// A set of register states, sorted and deduplicated so that equal sets compare (and hash)
/// equal in the memo cache.
type States = Vec<Register>;

/// The set of states `step` leads to from any of `states`; empty if its output is impossible.
fn apply(states: &[Register], step: Step) -> States {
    let mut out = Vec::with_capacity(states.len() * 2);
    for &r in states {
        successors(r, step, &mut out);
    }
    out.sort_unstable();
    // Of states that differ only in their floor (absent, or with an unknown resourceVersion),
    // the one with the lowest floor allows all that the others allow, and leads to states
    // that do too: keeping it alone changes no verdict, and lets more configurations meet
    // in the cache. Sorting put it first.
    out.dedup_by(|later, kept| later.object == kept.object);
    out
}

/// The id of all the values no read returned. Reads are all that tell values apart, so one
/// id does for those, and states that differ only in such values are one.
const UNREAD: ValueId = ValueId::MAX;

fn merge_unread_values(steps: &mut [Step]) {
    let read: HashSet<ValueId> = steps
        .iter()
        .filter_map(|s| match s.outcome {
            Outcome::Read(Some((_, v))) => Some(v),
            _ => None,
        })
        .collect();
    for s in steps {
        if let Action::Create(v) | Action::Patch(v) | Action::Update { value: v, .. } =
            &mut s.action
            && !read.contains(v)
        {
            *v = UNREAD;
        }
    }
}

/// Interns the values of one key's operations.
#[derive(Default)]
struct Values<'a> {
    ids: HashMap<&'a str, ValueId>,
    names: Vec<&'a str>,
}

impl<'a> Values<'a> {
    fn id(&mut self, value: &'a str) -> ValueId {
        *self.ids.entry(value).or_insert_with(|| {
            self.names.push(value);
            self.names.len() - 1
        })
    }

    fn step(&mut self, op: &'a Operation) -> Step {
        let action = match &op.input {
            Input::Create { value } => Action::Create(self.id(value)),
            Input::Get => Action::Get,
            Input::Update { expected, value } => Action::Update {
                expected: *expected,
                value: self.id(value),
            },
            Input::Patch { value } => Action::Patch(self.id(value)),
            Input::Delete => Action::Delete,
        };
        let outcome = match &op.output {
            Output::Written { rv } => Outcome::Written(*rv),
            Output::Read(read) => Outcome::Read(read.as_ref().map(|(rv, v)| (*rv, self.id(v)))),
            Output::Deleted => Outcome::Deleted,
            Output::AlreadyExists => Outcome::AlreadyExists,
            Output::NotFound => Outcome::NotFound,
            Output::Conflict => Outcome::Conflict,
            Output::Unknown => Outcome::Unknown,
        };
        Step { action, outcome }
    }

    fn describe(&self, r: &Register) -> String {
        let value = |v: ValueId| match self.names.get(v) {
            Some(name) => format!("value {name:?}"),
            None => "a value no read returned".to_owned(),
        };
        match r.object {
            None if r.floor == 0 => "absent".to_owned(),
            None => format!("absent (last known resourceVersion {})", r.floor),
            Some(Object {
                rv: Some(rv),
                value: v,
            }) => format!("present, rv {rv}, {}", value(v)),
            Some(Object { rv: None, value: v }) => {
                format!("present, rv unknown (> {}), {}", r.floor, value(v))
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// The search
// ---------------------------------------------------------------------------------------

enum KeyResult {
    Linearizable,
    Violation(String),
    OutOfTime,
}

/// A call or return of one operation: the entries of the history, in time order.
#[derive(Clone, Copy)]
struct Event {
    op: usize,
    is_call: bool,
}

/// One entry of Lowe's doubly linked list of the not yet linearized entries.
#[derive(Clone, Copy)]
struct Node {
    op: usize,
    /// For a call: the node of its return.
    ret: Option<usize>,
    prev: usize,
    next: usize,
}

/// The entries still to linearize, in time order, between two sentinels. Removed nodes keep
/// their links, so undoing removals in reverse order puts them back ("dancing links").
struct List {
    nodes: Vec<Node>,
}

const HEAD: usize = 0;

impl List {
    fn new(events: &[Event]) -> List {
        let tail = events.len() + 1;
        let sentinel = |prev, next| Node {
            op: usize::MAX,
            ret: None,
            prev,
            next,
        };
        let mut nodes = vec![sentinel(HEAD, 1)];
        // A call's return comes later in `events`; record where each op's return node is.
        let mut ret_node = vec![0; events.len() / 2];
        for (i, e) in events.iter().enumerate() {
            if !e.is_call {
                ret_node[e.op] = i + 1;
            }
        }
        for (i, e) in events.iter().enumerate() {
            nodes.push(Node {
                op: e.op,
                ret: e.is_call.then(|| ret_node[e.op]),
                prev: i,
                next: i + 2,
            });
        }
        nodes.push(sentinel(tail - 1, tail));
        List { nodes }
    }

    fn first(&self) -> usize {
        self.nodes[HEAD].next
    }

    fn unlink(&mut self, n: usize) {
        let Node { prev, next, .. } = self.nodes[n];
        self.nodes[prev].next = next;
        self.nodes[next].prev = prev;
    }

    fn relink(&mut self, n: usize) {
        let Node { prev, next, .. } = self.nodes[n];
        self.nodes[prev].next = n;
        self.nodes[next].prev = n;
    }

    /// Removes a call and its return: the operation is linearized.
    fn lift(&mut self, call: usize) {
        let ret = self.nodes[call].ret.expect("a call");
        self.unlink(call);
        self.unlink(ret);
    }

    /// Undoes the latest `lift`, which must have been of `call`.
    fn unlift(&mut self, call: usize) {
        let ret = self.nodes[call].ret.expect("a call");
        self.relink(ret);
        self.relink(call);
    }
}

/// Which operations are linearized: one bit per operation index.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Bitset(Vec<u64>);

impl Bitset {
    fn new(len: usize) -> Bitset {
        Bitset(vec![0; len.div_ceil(64)])
    }

    fn set(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }

    fn clear(&mut self, i: usize) {
        self.0[i / 64] &= !(1 << (i % 64));
    }
}

/// How many search steps between two looks at the clock.
const STEPS_PER_CLOCK_CHECK: u64 = 4096;

/// Searches for a linearization of one key's operations.
fn check_key(ops: &[&Operation], deadline: Option<Instant>) -> KeyResult {
    let mut values = Values::default();
    let mut steps: Vec<Step> = ops.iter().map(|op| values.step(op)).collect();
    // When each operation returns, None = never. An unknown outcome never returns even if
    // the client gave up at a known time: the request may still take effect after that. A
    // return before the call (clock trouble) is moved to the call.
    let mut rets: Vec<Option<u64>> = ops
        .iter()
        .zip(&steps)
        .map(|(op, s)| match s.outcome {
            Outcome::Unknown => None,
            _ => op.ret.map(|r| r.max(op.call)),
        })
        .collect();
    settle_observed(ops, &mut steps, &mut rets);
    // The steps with all their values, for the explanation.
    let shown = steps.clone();
    merge_unread_values(&mut steps);
    let events = events(ops, &rets);
    let mut search = Search::new(&steps, &events);
    match search.run(deadline) {
        Ok(true) => KeyResult::Linearizable,
        Ok(false) => {
            let explanation = explain(ops, &values, &shown, &search, &events);
            KeyResult::Violation(explanation)
        }
        Err(OutOfTime) => KeyResult::OutOfTime,
    }
}

/// The search took longer than its deadline.
struct OutOfTime;

/// Settles the unanswered writes a read proves took effect.
///
/// If a read returned a value that one operation alone may have written, and that
/// operation got no answer, then it took effect, before the read returned. It is then
/// checked as an answered write that returned then, with an unknown resourceVersion. This
/// changes no verdict, only the search: linearized as early as real time allows, as the
/// search does, an unanswered write tends to be overwritten before the read that saw it,
/// a dead end found only at the read, after trying every way of linearizing what came in
/// between, for each of the write's possible places.
fn settle_observed(ops: &[&Operation], steps: &mut [Step], rets: &mut [Option<u64>]) {
    let mut writers: HashMap<ValueId, Vec<usize>> = HashMap::new();
    let mut seen: HashMap<ValueId, Option<u64>> = HashMap::new();
    for (i, s) in steps.iter().enumerate() {
        match (s.action, s.outcome) {
            (
                Action::Create(v) | Action::Patch(v) | Action::Update { value: v, .. },
                Outcome::Written(_) | Outcome::Unknown,
            ) => writers.entry(v).or_default().push(i),
            (Action::Get, Outcome::Read(Some((_, v)))) => {
                // The earliest return among the reads of the value (None = never).
                let earliest = seen.entry(v).or_insert(rets[i]);
                if let Some(ret) = rets[i] {
                    *earliest = Some(earliest.map_or(ret, |e| e.min(ret)));
                }
            }
            _ => {}
        }
    }
    for (v, ret) in seen {
        if let Some(&[w]) = writers.get(&v).map(Vec::as_slice)
            && steps[w].outcome == Outcome::Unknown
        {
            steps[w].outcome = Outcome::Applied;
            rets[w] = ret.map(|r| r.max(ops[w].call));
        }
    }
}

/// What an answered operation that names a resourceVersion implies for the floor of the
/// state it is linearized in (floors never decrease).
#[derive(Clone, Copy)]
struct Bounds {
    /// The floor before it can be at most this: a write answered with rv needs it below rv,
    /// a CAS also at most its expected rv; a read of rv needs it at most rv.
    needs: Option<u64>,
    /// The floor after it is at least this: the rv written or read.
    raises: Option<u64>,
}

impl Bounds {
    fn of(step: Step) -> Bounds {
        let (needs, raises) = match (step.action, step.outcome) {
            (Action::Update { expected, .. }, Outcome::Written(rv)) => {
                (Some(expected.min(rv.saturating_sub(1))), Some(rv))
            }
            (_, Outcome::Written(rv)) => (Some(rv.saturating_sub(1)), Some(rv)),
            (Action::Get, Outcome::Read(Some((rv, _)))) => (Some(rv), Some(rv)),
            _ => (None, None),
        };
        Bounds { needs, raises }
    }
}

/// The two smallest (needs, operation) among some operations, smallest first.
type Guard = [Option<(u64, usize)>; 2];

/// The [`Guard`] of the calls real time allows next: those before the first pending return.
fn guard(list: &List, bounds: &[Bounds]) -> Guard {
    let mut guard: Guard = [None, None];
    let mut node = list.first();
    while let Node {
        op,
        ret: Some(_),
        next,
        ..
    } = list.nodes[node]
    {
        if let Some(needs) = bounds[op].needs {
            let entry = Some((needs, op));
            if guard[0].is_none_or(|g| (needs, op) < g) {
                guard = [entry, guard[0]];
            } else if guard[1].is_none_or(|g| (needs, op) < g) {
                guard[1] = entry;
            }
        }
        node = next;
    }
    guard
}

/// A linearized operation, with what backtracking needs to undo it.
struct Choice {
    /// Its call node.
    node: usize,
    /// The state set before it.
    before: States,
    /// Linearized without trying the alternatives (see [`Search`]): once it is undone, the
    /// configuration before it is known to lead nowhere either.
    forced: bool,
}

/// Whether an operation can be linearized without trying the alternatives (see [`Search`]).
#[derive(Clone, Copy)]
enum Filter {
    /// It may change states.
    No,
    /// It can only keep or drop states: forced when it keeps them all.
    Keeps,
    /// A read of a value one answered write wrote, and no other operation: forced whenever
    /// possible.
    Pinned,
}

/// What became of an attempt to linearize an operation next.
enum Attempt {
    Taken,
    /// Impossible in every state, or leading to a configuration already explored.
    Refused,
    /// The current configuration is known to lead nowhere: backtrack.
    Doomed,
}

/// The depth-first search over one key's operations.
///
/// Refinements of the plain search keep it small on histories with many concurrent
/// operations and lost answers (each prunes only what cannot lead to a linearization, or
/// what another branch covers, so verdicts stay those of the plain search):
///
/// - Operations with an unknown outcome never have to be linearized: "no effect" is always
///   one of their outcomes, so once every answered operation is linearized, the rest can
///   follow in any order. The search is done at that point.
/// - A *filter*, an operation that can only keep or drop states, never change them (a read
///   that can reveal no resourceVersion, a Conflict, a NotFound, an AlreadyExists), which
///   real time allows next and which holds in every current state, is linearized next
///   without trying the alternatives. This loses no linearization: in any completion it
///   can be moved to the front, since no pending operation precedes it in real time, the
///   operations it jumps over see the same states, and those after it a superset of the
///   states they saw (steps are monotone in the state set). So if nothing follows it, nothing
///   follows the configuration before it either. Without this, a dead end behind many
///   concurrent reads would be found again for each order of the reads.
///   A read of a value that exactly one operation, an answered write, wrote is forced even
///   if it drops states (say, those where an unanswered write took effect): the state it
///   reads has a resourceVersion and value no other operation can produce again, so in any
///   completion the operations it jumps over kept that very state, and they can keep it
///   after the read as well.
/// - The floor (see [`Register`]) never decreases along a linearization, and an answered
///   operation that names a resourceVersion both needs the floor low enough before it and
///   raises it after (see [`Bounds`]). An operation is not linearized while another one real
///   time allows next needs a floor below what it would raise the floor to: that one could
///   never follow. This orders concurrent successful writes by resourceVersion at once,
///   instead of finding out at each one's return that skipping it was a dead end. (Looking
///   beyond the operations allowed next would prune more, but then a stale read would stop
///   the search long before the read, where the explanation would not show it.)
struct Search<'s> {
    steps: &'s [Step],
    /// Unknown outcome (no answer).
    optional: Vec<bool>,
    filter: Vec<Filter>,
    bounds: Vec<Bounds>,
    /// The two smallest `needs` (with their operations) among the calls real time allows
    /// next in the current configuration; computed when first wanted.
    guard: Option<Guard>,
    /// The entries still to linearize (Lowe's list).
    list: List,
    linearized: Bitset,
    state: States,
    /// How many answered operations are not linearized yet.
    required: usize,
    calls: Vec<Choice>,
    /// Every configuration reached so far: reaching one again cannot lead anywhere new (it
    /// is either being explored, with fewer operations linearized, or it led nowhere).
    cache: HashSet<(Bitset, States)>,
    /// The longest linearizable prefix seen and the states after it, for the explanation.
    best: (Vec<usize>, States),
}

impl<'s> Search<'s> {
    fn new(steps: &'s [Step], events: &[Event]) -> Search<'s> {
        let optional: Vec<bool> = steps
            .iter()
            .map(|s| s.outcome == Outcome::Unknown)
            .collect();
        // How many operations may have written each value, answered and unanswered. A value
        // an unanswered write wrote may be held with an unknown resourceVersion, which a read
        // of that value reveals (a change of state).
        let mut writers: HashMap<ValueId, (usize, usize)> = HashMap::new();
        for s in steps {
            if let Action::Create(v) | Action::Patch(v) | Action::Update { value: v, .. } = s.action
            {
                match s.outcome {
                    Outcome::Written(_) => writers.entry(v).or_default().0 += 1,
                    Outcome::Unknown | Outcome::Applied => writers.entry(v).or_default().1 += 1,
                    _ => {}
                }
            }
        }
        let filter = steps
            .iter()
            .map(|s| match s.outcome {
                Outcome::AlreadyExists
                | Outcome::Conflict
                | Outcome::NotFound
                | Outcome::Read(None) => Filter::Keeps,
                Outcome::Read(Some((_, v))) => match writers.get(&v) {
                    Some(&(1, 0)) => Filter::Pinned,
                    Some(&(_, 0)) | None => Filter::Keeps,
                    Some(_) => Filter::No,
                },
                Outcome::Written(_) | Outcome::Deleted | Outcome::Unknown | Outcome::Applied => {
                    Filter::No
                }
            })
            .collect();
        let bounds: Vec<Bounds> = steps.iter().map(|&s| Bounds::of(s)).collect();
        let state = vec![Register::INITIAL];
        Search {
            steps,
            required: optional.iter().filter(|&&o| !o).count(),
            optional,
            filter,
            bounds,
            guard: None,
            list: List::new(events),
            linearized: Bitset::new(steps.len()),
            best: (Vec::new(), state.clone()),
            state,
            calls: Vec::new(),
            cache: HashSet::new(),
        }
    }

    /// Whether the operations have a linearization.
    fn run(&mut self, deadline: Option<Instant>) -> Result<bool, OutOfTime> {
        let mut node = self.list.first();
        let mut count = 0u64;
        while self.required > 0 {
            count += 1;
            if count.is_multiple_of(STEPS_PER_CLOCK_CHECK)
                && deadline.is_some_and(|d| Instant::now() >= d)
            {
                return Err(OutOfTime);
            }
            let Node { ret, next, .. } = self.list.nodes[node];
            // A call real time allows next: try linearizing it now.
            let attempt = match ret {
                Some(_) => self.linearize(node),
                // The first pending return: that operation cannot be put off any longer,
                // and each call before it has been tried.
                None => Attempt::Doomed,
            };
            node = match attempt {
                Attempt::Taken => self.list.first(),
                Attempt::Refused => next,
                // Undo the latest choice and try the calls after it instead.
                Attempt::Doomed => match self.undo() {
                    Some(node) => node,
                    None => return Ok(false),
                },
            };
        }
        Ok(true)
    }

    /// Tries to linearize the operation of the call `node` next.
    fn linearize(&mut self, node: usize) -> Attempt {
        let op = self.list.nodes[node].op;
        if let Some(raises) = self.bounds[op].raises {
            let (list, bounds) = (&self.list, &self.bounds);
            let guard = self.guard.get_or_insert_with(|| guard(list, bounds));
            let lowest = guard.iter().flatten().find(|&&(_, other)| other != op);
            if lowest.is_some_and(|&(needs, _)| needs < raises) {
                return Attempt::Refused;
            }
        }
        let after = apply(&self.state, self.steps[op]);
        if after.is_empty() {
            return Attempt::Refused;
        }
        let forced = match self.filter[op] {
            Filter::No => false,
            Filter::Keeps => after == self.state,
            Filter::Pinned => true,
        };
        let mut bits = self.linearized.clone();
        bits.set(op);
        if !self.cache.insert((bits.clone(), after.clone())) {
            // Already explored, in vain. For a filter, that dooms the current configuration.
            return if forced {
                Attempt::Doomed
            } else {
                Attempt::Refused
            };
        }
        let before = std::mem::replace(&mut self.state, after);
        self.calls.push(Choice {
            node,
            before,
            forced,
        });
        self.linearized = bits;
        if !self.optional[op] {
            self.required -= 1;
        }
        self.list.lift(node);
        self.guard = None;
        if self.calls.len() > self.best.0.len() {
            self.best = (
                self.calls
                    .iter()
                    .map(|c| self.list.nodes[c.node].op)
                    .collect(),
                self.state.clone(),
            );
        }
        Attempt::Taken
    }

    /// Undoes the latest choice (and the forced ones before it); returns the node to go on
    /// from, or None (a violation) if there was no choice left to undo.
    fn undo(&mut self) -> Option<usize> {
        loop {
            let Choice {
                node,
                before,
                forced,
            } = self.calls.pop()?;
            let op = self.list.nodes[node].op;
            self.state = before;
            self.linearized.clear(op);
            if !self.optional[op] {
                self.required += 1;
            }
            self.list.unlift(node);
            self.guard = None;
            if !forced {
                return Some(self.list.nodes[node].next);
            }
        }
    }
}

/// The calls and returns in time order (returns at `rets`), such that an operation A
/// precedes an operation B (A's return comes before B's call) iff A returned strictly before
/// B was sent.
fn events(ops: &[&Operation], rets: &[Option<u64>]) -> Vec<Event> {
    // Sort key: (never returns, time, 0 for a call / 1 for a return, op). At equal times a
    // call goes first, so an answer and a request at the same instant stay concurrent; ops
    // without an answer return after everything.
    let mut keyed: Vec<((bool, u64, u8, usize), Event)> = Vec::with_capacity(ops.len() * 2);
    for (i, (op, ret)) in ops.iter().zip(rets).enumerate() {
        let call = Event {
            op: i,
            is_call: true,
        };
        keyed.push(((false, op.call, 0, i), call));
        let event = Event {
            op: i,
            is_call: false,
        };
        keyed.push(((ret.is_none(), ret.unwrap_or(0), 1, i), event));
    }
    keyed.sort_unstable_by_key(|&(k, _)| k);
    keyed.into_iter().map(|(_, e)| e).collect()
}

/// The explanation of a violation: a longest linearizable prefix the search found, and
/// why none of the operations real time allows next can follow it.
fn explain(
    ops: &[&Operation],
    values: &Values,
    shown: &[Step],
    search: &Search,
    events: &[Event],
) -> String {
    const SHOWN: usize = 20;
    let prefix = &search.best.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "no linearization of the {} operations on this key; a longest linearizable prefix has {}:",
        ops.len(),
        prefix.len()
    );
    let skipped = prefix.len().saturating_sub(SHOWN);
    if skipped > 0 {
        let _ = writeln!(s, "  … {skipped} earlier operations");
    }
    for (i, &op) in prefix.iter().enumerate().skip(skipped) {
        let _ = writeln!(s, "  {:>4}. {}", i + 1, describe(ops[op]));
    }
    // The states after the prefix again, with the values the search merged.
    let states = prefix.iter().fold(vec![Register::INITIAL], |states, &op| {
        apply(&states, shown[op])
    });
    let described: Vec<String> = states.iter().map(|r| values.describe(r)).collect();
    let _ = writeln!(s, "possible states after it: {}", described.join(" | "));
    // What real time allows next: the calls before the first pending return.
    let done: HashSet<usize> = prefix.iter().copied().collect();
    let next: Vec<usize> = events
        .iter()
        .filter(|e| !done.contains(&e.op))
        .take_while(|e| e.is_call)
        .map(|e| e.op)
        .collect();
    let _ = writeln!(
        s,
        "none of the operations real time allows next can follow:"
    );
    for &op in next.iter().take(SHOWN) {
        let _ = writeln!(s, "  {}", describe(ops[op]));
        let _ = writeln!(s, "      {}", why_not(ops, search, &next, op));
    }
    if next.len() > SHOWN {
        let _ = writeln!(s, "  … and {} more", next.len() - SHOWN);
    }
    s
}

/// Why `op`, one of the operations real time allows `next`, cannot follow the longest prefix.
fn why_not(ops: &[&Operation], search: &Search, next: &[usize], op: usize) -> String {
    let (_, states) = &search.best;
    if apply(states, search.steps[op]).is_empty() {
        return "impossible in each of those states".to_owned();
    }
    // Possible, so it was refused for an answered operation it would rule out.
    let raises = search.bounds[op].raises.unwrap_or(0);
    let blocked = next
        .iter()
        .filter(|&&other| other != op)
        .filter_map(|&other| search.bounds[other].needs.map(|needs| (needs, other)))
        .filter(|&(needs, _)| needs < raises)
        .min();
    match blocked {
        Some((needs, other)) => format!(
            "possible, but it would rule out {}, which needs the resourceVersions so far ≤ {needs}",
            describe(ops[other])
        ),
        None => "possible, but nothing can follow it".to_owned(),
    }
}

fn describe(op: &Operation) -> String {
    let ret = op.ret.map_or_else(|| "no answer".to_owned(), seconds);
    format!(
        "client {} [{} → {}] {:?} → {:?}",
        op.client,
        seconds(op.call),
        ret,
        op.input,
        op.output
    )
}

/// Nanoseconds as seconds, e.g. `1.000250000s`.
fn seconds(ns: u64) -> String {
    format!("{}.{:09}s", ns / 1_000_000_000, ns % 1_000_000_000)
}

#[cfg(test)]
mod tests {
    use capmox_apiserver::proxmox::sim::rng::Rng;

    use super::*;

    const BUDGET: Duration = Duration::from_secs(5);

    /// An answered operation by `client` on key "m", sent at `call` and answered at `ret`.
    fn at(client: usize, call: u64, ret: u64, input: Input, output: Output) -> Operation {
        Operation {
            client,
            call,
            ret: Some(ret),
            key: "m".to_owned(),
            input,
            output,
        }
    }

    /// A request on key "m" sent at `call` that got no answer.
    fn lost(client: usize, call: u64, input: Input) -> Operation {
        Operation {
            client,
            call,
            ret: None,
            key: "m".to_owned(),
            input,
            output: Output::Unknown,
        }
    }

    fn on(key: &str, op: Operation) -> Operation {
        Operation {
            key: key.to_owned(),
            ..op
        }
    }

    fn create(value: &str) -> Input {
        Input::Create {
            value: value.to_owned(),
        }
    }

    fn update(expected: u64, value: &str) -> Input {
        Input::Update {
            expected,
            value: value.to_owned(),
        }
    }

    fn patch(value: &str) -> Input {
        Input::Patch {
            value: value.to_owned(),
        }
    }

    fn written(rv: u64) -> Output {
        Output::Written { rv }
    }

    fn read(rv: u64, value: &str) -> Output {
        Output::Read(Some((rv, value.to_owned())))
    }

    fn assert_linearizable(history: &[Operation]) {
        match check(history, BUDGET) {
            Verdict::Linearizable => {}
            other => panic!("expected linearizable, got {other:?}"),
        }
    }

    /// Asserts a violation on key "m" and returns its explanation.
    fn assert_violation(history: &[Operation]) -> String {
        match check(history, BUDGET) {
            Verdict::Violation { key, explanation } => {
                assert_eq!(key, "m");
                explanation
            }
            other => panic!("expected a violation, got {other:?}"),
        }
    }

    #[test]
    fn sequential_history_is_linearizable() {
        assert_linearizable(&[
            at(0, 0, 1, Input::Get, Output::Read(None)),
            at(0, 2, 3, create("a"), written(2)),
            at(1, 4, 5, create("x"), Output::AlreadyExists),
            at(0, 6, 7, Input::Get, read(2, "a")),
            at(1, 8, 9, update(2, "b"), written(3)),
            at(0, 10, 11, update(2, "c"), Output::Conflict),
            at(0, 12, 13, patch("d"), written(5)),
            at(1, 14, 15, Input::Get, read(5, "d")),
            at(0, 16, 17, Input::Delete, Output::Deleted),
            at(1, 18, 19, Input::Delete, Output::NotFound),
            at(1, 20, 21, patch("e"), Output::NotFound),
            at(1, 22, 23, update(5, "e"), Output::NotFound),
            at(0, 24, 25, Input::Get, Output::Read(None)),
            at(0, 26, 27, create("f"), written(9)),
        ]);
    }

    #[test]
    fn empty_history_is_linearizable() {
        assert_linearizable(&[]);
    }

    #[test]
    fn concurrent_create_and_get_are_linearizable_either_way() {
        for seen in [Output::Read(None), read(2, "a")] {
            assert_linearizable(&[
                at(0, 0, 10, create("a"), written(2)),
                at(1, 5, 15, Input::Get, seen),
            ]);
        }
    }

    #[test]
    fn stale_read_after_acknowledged_update_is_a_violation() {
        let explanation = assert_violation(&[
            at(0, 0, 1, create("a"), written(2)),
            at(0, 2, 3, update(2, "b"), written(3)),
            at(1, 4, 5, Input::Get, read(2, "a")),
        ]);
        // The explanation shows the prefix and the read that cannot follow it.
        for part in [
            "a longest linearizable prefix has 2",
            "Update { expected: 2, value: \"b\" } → Written { rv: 3 }",
            "possible states after it: present, rv 3, value \"b\"",
            "client 1 [0.000000004s → 0.000000005s] Get → Read(Some((2, \"a\")))",
            "impossible in each of those states",
        ] {
            assert!(explanation.contains(part), "{part}: {explanation}");
        }
    }

    #[test]
    fn lost_acknowledged_write_is_a_violation() {
        assert_violation(&[
            at(0, 0, 1, create("a"), written(2)),
            at(1, 2, 3, patch("b"), written(3)),
            at(0, 4, 5, Input::Get, read(2, "a")),
        ]);
    }

    #[test]
    fn cas_that_succeeded_with_a_wrong_expected_rv_is_a_violation() {
        assert_violation(&[
            at(0, 0, 1, create("a"), written(2)),
            at(1, 2, 3, update(1, "b"), written(3)),
        ]);
    }

    #[test]
    fn cas_that_conflicted_with_the_right_expected_rv_is_a_violation() {
        assert_violation(&[
            at(0, 0, 1, create("a"), written(2)),
            at(1, 2, 3, update(2, "b"), Output::Conflict),
        ]);
    }

    #[test]
    fn two_concurrent_cas_with_the_same_expected_rv_cannot_both_succeed() {
        assert_violation(&[
            at(0, 0, 1, create("a"), written(2)),
            at(1, 2, 10, update(2, "b"), written(3)),
            at(2, 3, 11, update(2, "c"), written(4)),
        ]);
        // One succeeding and the other conflicting is fine, whichever was sent first.
        assert_linearizable(&[
            at(0, 0, 1, create("a"), written(2)),
            at(1, 2, 10, update(2, "b"), Output::Conflict),
            at(2, 3, 11, update(2, "c"), written(4)),
        ]);
    }

    #[test]
    fn resource_versions_must_increase() {
        assert_violation(&[
            at(0, 0, 1, create("a"), written(5)),
            at(0, 2, 3, patch("b"), written(4)),
        ]);
        // Also across a delete, and for a resourceVersion a read reveals.
        assert_violation(&[
            at(0, 0, 1, create("a"), written(5)),
            at(0, 2, 3, Input::Delete, Output::Deleted),
            at(0, 4, 5, create("b"), written(5)),
        ]);
        assert_violation(&[
            at(0, 0, 1, create("a"), written(5)),
            lost(1, 2, patch("b")),
            at(0, 4, 5, Input::Get, read(4, "b")),
        ]);
    }

    #[test]
    fn unknown_create_later_observed_is_linearizable() {
        assert_linearizable(&[
            lost(0, 0, create("a")),
            at(1, 5, 6, Input::Get, read(2, "a")),
            // The revealed resourceVersion is the one a CAS must carry.
            at(1, 7, 8, update(2, "b"), written(3)),
            at(1, 9, 10, Input::Get, read(3, "b")),
        ]);
        // Observed with two different resourceVersions: not the same write.
        assert_violation(&[
            lost(0, 0, create("a")),
            at(1, 5, 6, Input::Get, read(2, "a")),
            at(1, 7, 8, Input::Get, read(3, "a")),
        ]);
    }

    #[test]
    fn unknown_create_never_observed_is_linearizable() {
        assert_linearizable(&[
            lost(0, 0, create("a")),
            at(1, 5, 6, Input::Get, Output::Read(None)),
            at(1, 7, 8, create("b"), written(3)),
            at(1, 9, 10, Input::Get, read(3, "b")),
        ]);
    }

    #[test]
    fn unknown_create_may_take_effect_long_after_it_was_sent() {
        assert_linearizable(&[
            lost(0, 0, create("a")),
            at(1, 5, 6, Input::Get, Output::Read(None)),
            at(1, 7, 8, Input::Get, read(2, "a")),
        ]);
    }

    #[test]
    fn unknown_update_observed_later_is_linearizable() {
        assert_linearizable(&[
            at(0, 0, 1, create("a"), written(2)),
            lost(0, 2, update(2, "b")),
            at(1, 3, 4, Input::Get, read(2, "a")),
            at(1, 10, 11, Input::Get, read(3, "b")),
            at(1, 12, 13, Input::Get, read(3, "b")),
        ]);
        // An unknown update whose expected resourceVersion was stale cannot have taken effect.
        assert_violation(&[
            at(0, 0, 1, create("a"), written(2)),
            at(0, 2, 3, patch("b"), written(3)),
            lost(0, 4, update(2, "c")),
            at(1, 10, 11, Input::Get, read(4, "c")),
        ]);
    }

    #[test]
    fn unknown_writes_whose_effect_is_overwritten_are_linearizable() {
        // The lost patch took effect after the acknowledged one: it must go after it.
        assert_linearizable(&[
            at(0, 0, 1, create("a"), written(2)),
            lost(1, 2, patch("b")),
            at(0, 3, 4, patch("c"), written(3)),
            at(0, 5, 6, Input::Get, read(4, "b")),
        ]);
        // A lost delete explains an object gone without an acknowledged delete.
        assert_linearizable(&[
            at(0, 0, 1, create("a"), written(2)),
            lost(1, 2, Input::Delete),
            at(0, 3, 4, Input::Get, read(2, "a")),
            at(0, 5, 6, Input::Get, Output::Read(None)),
        ]);
    }

    #[test]
    fn unknown_write_that_a_read_saw_took_effect_before_the_read_returned() {
        let history = |last: Output| {
            vec![
                at(0, 0, 1, create("a"), written(2)),
                lost(1, 2, patch("b")),
                at(0, 3, 4, Input::Get, read(3, "b")),
                at(0, 5, 6, Input::Get, last),
            ]
        };
        assert_linearizable(&history(read(3, "b")));
        assert_violation(&history(read(2, "a")));
    }

    #[test]
    fn read_before_an_unknown_write_takes_effect_is_linearizable() {
        // The read of "a" must go between the create and the lost patch's effect.
        assert_linearizable(&[
            at(0, 0, 1, create("a"), written(2)),
            lost(1, 2, patch("b")),
            at(0, 3, 4, Input::Get, read(2, "a")),
            at(0, 5, 6, Input::Get, read(3, "b")),
        ]);
    }

    #[test]
    fn conflict_explained_by_an_unknown_write_is_linearizable() {
        assert_linearizable(&[
            at(0, 0, 1, create("a"), written(2)),
            lost(1, 2, patch("b")),
            at(0, 5, 6, update(2, "c"), Output::Conflict),
        ]);
    }

    #[test]
    fn delete_then_get_returning_the_object_is_a_violation() {
        assert_violation(&[
            at(0, 0, 1, create("a"), written(2)),
            at(0, 2, 3, Input::Delete, Output::Deleted),
            at(1, 4, 5, Input::Get, read(2, "a")),
        ]);
    }

    #[test]
    fn get_returning_a_value_never_written_is_a_violation() {
        assert_violation(&[
            at(0, 0, 1, create("a"), written(2)),
            at(1, 2, 3, Input::Get, read(2, "zzz")),
        ]);
        // Nor the right value with another resourceVersion.
        assert_violation(&[
            at(0, 0, 1, create("a"), written(2)),
            at(1, 2, 3, Input::Get, read(3, "a")),
        ]);
    }

    #[test]
    fn equal_timestamps_impose_no_order() {
        // The patch's answer and the read's request at the same instant: concurrent.
        assert_linearizable(&[
            at(0, 0, 1, create("a"), written(2)),
            at(0, 2, 5, patch("b"), written(3)),
            at(1, 5, 6, Input::Get, read(2, "a")),
        ]);
        // One nanosecond later, the read must see the patch.
        assert_violation(&[
            at(0, 0, 1, create("a"), written(2)),
            at(0, 2, 5, patch("b"), written(3)),
            at(1, 6, 7, Input::Get, read(2, "a")),
        ]);
    }

    #[test]
    fn unanswered_reads_are_ignored() {
        assert_linearizable(&[at(0, 0, 1, create("a"), written(2)), lost(1, 2, Input::Get)]);
    }

    #[test]
    fn keys_are_checked_independently() {
        // Interleaved in time, each key is linearizable on its own: as one object it would
        // not be (the second create would fail, the reads would disagree).
        let history = [
            on("a", at(0, 0, 1, create("x"), written(2))),
            on("b", at(1, 2, 3, create("y"), written(3))),
            on("a", at(0, 4, 5, Input::Get, read(2, "x"))),
            on("b", at(1, 6, 7, Input::Get, read(3, "y"))),
        ];
        assert_linearizable(&history);
        // A violation on one key is reported with that key.
        let mut broken = history.to_vec();
        broken.push(on("b", at(1, 8, 9, Input::Get, read(2, "x"))));
        match check(&broken, BUDGET) {
            Verdict::Violation { key, .. } => assert_eq!(key, "b"),
            other => panic!("expected a violation on b, got {other:?}"),
        }
    }

    #[test]
    fn exhausted_budget_is_undecided() {
        // 24 concurrent patches without an answer, then a read of a value never written:
        // refuting it takes trying every subset and order of the patches.
        let mut history = vec![at(0, 0, 1, create("a"), written(2))];
        for i in 0..24 {
            history.push(lost(i + 1, 10, patch(&format!("p{i}"))));
        }
        history.push(at(0, 200, 201, Input::Get, read(99, "nowhere")));
        match check(&history, Duration::ZERO) {
            Verdict::Undecided { key } => assert_eq!(key, "m"),
            other => panic!("expected undecided, got {other:?}"),
        }
    }

    /// A uniform pick below `n` from the simulator's seeded generator.
    fn below(rng: &mut Rng, n: u64) -> u64 {
        rng.range(0, n - 1)
    }

    /// A successful write in the simulation: it takes the next etcd revision (so do deletes).
    fn write(revision: &mut u64, object: &mut Option<(u64, String)>, value: &str) -> Output {
        *revision += 1;
        *object = Some((*revision, value.to_owned()));
        Output::Written { rv: *revision }
    }

    /// A history of `clients` clients × `per_client` operations on one real, sequential
    /// register with etcd's resourceVersions. Each client sends a request, waits up to 1 ms
    /// for it to take effect and 1 ms more for the answer, thinks up to 0.2 ms, and so on;
    /// the register applies the requests in the order they take effect, so the history is
    /// linearizable by construction. About `lost_percent`% of the writes get no answer;
    /// half of those take effect anyway.
    fn simulate(seed: u64, clients: usize, per_client: usize, lost_percent: u64) -> Vec<Operation> {
        const MICROS: u64 = 1000;
        let mut rng = Rng::new(seed);
        // (when it takes effect, client, call, ret), in the order the register applies them.
        let mut timings = Vec::with_capacity(clients * per_client);
        for c in 0..clients {
            let mut free = 0;
            for _ in 0..per_client {
                let call = free + below(&mut rng, 200) * MICROS;
                let point = call + below(&mut rng, 1000) * MICROS;
                let ret = point + below(&mut rng, 1000) * MICROS;
                timings.push((point, c, call, ret));
                free = ret;
            }
        }
        timings.sort_unstable();
        let mut revision = 1; // An empty etcd is at revision 1.
        let mut object: Option<(u64, String)> = None;
        let mut seen = vec![0; clients]; // the last resourceVersion each client saw
        let mut history = Vec::new();
        for (_, c, call, ret) in timings {
            let value = format!("v{}", history.len());
            let input = match below(&mut rng, 20) {
                0..=1 => Input::Create { value },
                2..=8 => Input::Get,
                9..=13 => Input::Update {
                    expected: seen[c],
                    value,
                },
                14..=17 => Input::Patch { value },
                _ => Input::Delete,
            };
            let lost = input != Input::Get && below(&mut rng, 100) < lost_percent;
            let current = object.as_ref().map(|&(rv, _)| rv);
            let output = match (&input, current) {
                _ if lost && below(&mut rng, 2) == 0 => Output::Unknown, // never reached etcd
                (Input::Create { value }, None) | (Input::Patch { value }, Some(_)) => {
                    write(&mut revision, &mut object, value)
                }
                (Input::Update { expected, value }, Some(rv)) if rv == *expected => {
                    write(&mut revision, &mut object, value)
                }
                (Input::Create { .. }, Some(_)) => Output::AlreadyExists,
                (Input::Update { .. }, Some(_)) => Output::Conflict,
                (Input::Get, _) => Output::Read(object.clone()),
                (Input::Delete, Some(_)) => {
                    revision += 1;
                    object = None;
                    Output::Deleted
                }
                (Input::Update { .. } | Input::Patch { .. } | Input::Delete, None) => {
                    Output::NotFound
                }
            };
            match &output {
                Output::Written { rv } | Output::Read(Some((rv, _))) => seen[c] = *rv,
                _ => {}
            }
            let (ret, output) = if lost {
                (None, Output::Unknown)
            } else {
                (Some(ret), output)
            };
            history.push(Operation {
                client: c,
                call,
                ret,
                key: "m".to_owned(),
                input,
                output,
            });
        }
        history
    }

    #[test]
    fn random_valid_history_is_linearizable_within_a_second() {
        let history = simulate(0x5eed, 3, 200, 3);
        assert_eq!(history.len(), 600);
        let start = Instant::now();
        // The budget makes a slow search Undecided, failing the test.
        let verdict = check(&history, Duration::from_secs(1));
        eprintln!("600 operations checked in {:?}", start.elapsed());
        assert_eq!(verdict, Verdict::Linearizable);
        // Other seeds, more clients, more lost answers, several keys at once.
        let mut many = Vec::new();
        for seed in 1..=8 {
            many.extend(
                simulate(seed, 5, 100, 5)
                    .into_iter()
                    .map(|op| on(&format!("m{seed}"), op)),
            );
        }
        assert_eq!(check(&many, Duration::from_secs(5)), Verdict::Linearizable);
    }

    #[test]
    fn random_history_with_one_corrupted_read_is_a_violation() {
        let mut history = simulate(0x5eed, 3, 200, 3);
        // A read in the second half gets the value of a write that an acknowledged write
        // had already overwritten before the read was sent: a stale read.
        let first = history
            .iter()
            .find_map(|op| match (&op.input, &op.output) {
                (
                    Input::Create { value } | Input::Update { value, .. } | Input::Patch { value },
                    Output::Written { rv },
                ) => Some((*rv, value.clone())),
                _ => None,
            })
            .expect("a write");
        let stale = (300..history.len())
            .find(|&i| {
                let r = &history[i];
                matches!(r.output, Output::Read(Some(_)))
                    && history.iter().any(|w| {
                        matches!(w.output, Output::Written { rv } if rv > first.0)
                            && w.ret.is_some_and(|ret| ret < r.call)
                    })
            })
            .expect("a read after an acknowledged overwrite");
        history[stale].output = Output::Read(Some(first.clone()));
        let explanation = assert_violation(&history);
        eprintln!("{explanation}");
        // The explanation names the corrupted read.
        let shown = format!("{:?}", Output::Read(Some(first)));
        assert!(explanation.contains(&shown), "{explanation}");
    }

    /// A reference for small histories: every order real time allows, tried in turn, with
    /// none of the search's pruning, memo or rewriting.
    fn brute_force(history: &[Operation]) -> bool {
        let keys: HashSet<&str> = history.iter().map(|op| op.key.as_str()).collect();
        keys.into_iter().all(|key| {
            let ops: Vec<&Operation> = history
                .iter()
                .filter(|op| op.key == key)
                .filter(|op| !(op.input == Input::Get && op.output == Output::Unknown))
                .collect();
            let mut values = Values::default();
            let steps: Vec<Step> = ops.iter().map(|op| values.step(op)).collect();
            let rets: Vec<Option<u64>> = ops
                .iter()
                .map(|op| match op.output {
                    Output::Unknown => None,
                    _ => op.ret.map(|r| r.max(op.call)),
                })
                .collect();
            let mut pending = vec![true; ops.len()];
            orders(&ops, &steps, &rets, &mut pending, vec![Register::INITIAL])
        })
    }

    fn orders(
        ops: &[&Operation],
        steps: &[Step],
        rets: &[Option<u64>],
        pending: &mut [bool],
        states: Vec<Register>,
    ) -> bool {
        if !pending.contains(&true) {
            return true;
        }
        for i in 0..ops.len() {
            let preceded =
                (0..ops.len()).any(|j| pending[j] && rets[j].is_some_and(|ret| ret < ops[i].call));
            if !pending[i] || preceded {
                continue;
            }
            let mut next = Vec::new();
            for &r in &states {
                successors(r, steps[i], &mut next);
            }
            next.sort_unstable();
            next.dedup();
            if next.is_empty() {
                continue;
            }
            pending[i] = false;
            let found = orders(ops, steps, rets, pending, next);
            pending[i] = true;
            if found {
                return true;
            }
        }
        false
    }

    #[test]
    fn agrees_with_brute_force_on_small_histories() {
        let mut rng = Rng::new(0xb00f);
        let (mut valid, mut invalid) = (0, 0);
        for seed in 1..=3000 {
            let clients = 2 + (seed % 2) as usize;
            let mut history = simulate(seed, clients, 2 + (seed % 3 == 0) as usize, 30);
            // Half of them get one output changed, which often breaks them.
            if below(&mut rng, 2) == 0 {
                let i = below(&mut rng, history.len() as u64) as usize;
                let op = &mut history[i];
                op.output = match (&op.output, below(&mut rng, 3)) {
                    (Output::Written { rv }, 0) => Output::Written { rv: rv + 1 },
                    (Output::Written { .. }, _) => Output::Conflict,
                    (Output::Read(Some((rv, _))), 0) => Output::Read(Some((rv + 1, "v0".into()))),
                    (Output::Read(Some((rv, _))), 1) => Output::Read(Some((*rv, "v1".into()))),
                    (Output::Read(_), _) => Output::Read(None),
                    (Output::Deleted, _) => Output::NotFound,
                    (Output::NotFound, _) => Output::Deleted,
                    (Output::Conflict, _) => Output::Written { rv: 3 },
                    (Output::AlreadyExists, _) => Output::Written { rv: 2 },
                    (Output::Unknown, _) => Output::Unknown,
                };
            }
            let expected = brute_force(&history);
            let verdict = check(&history, BUDGET);
            match (&verdict, expected) {
                (Verdict::Linearizable, true) => valid += 1,
                (Verdict::Violation { .. }, false) => invalid += 1,
                _ => panic!("seed {seed}: {verdict:?}, brute force says {expected}: {history:#?}"),
            }
        }
        // Both kinds were exercised.
        assert!(
            valid > 1000 && invalid > 300,
            "{valid} valid, {invalid} invalid"
        );
    }
}
