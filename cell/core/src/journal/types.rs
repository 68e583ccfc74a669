//! The data the fold works over: state, view, commands and outcomes.

use bytes::Bytes;
use serde::{Deserialize, Deserializer, Serialize};

use crate::ids::{LeaderUuid, NodeId, Seq};
use crate::object::ObjectOnly;

/// How a journal is written, fixed when it is created.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default, Serialize, Deserialize)]
pub enum WriterMode {
    /// One writer at a time, fenced by a [`LeaderUuid`]; writes land exactly at `next_seq`.
    #[default]
    Single,
    /// Anyone appends at the tail, unfenced, at least once.
    Multi,
}

/// The fold of a journal's chosen commands. `term` is internal; [`JournalView`] is what calls see.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub struct JournalState {
    pub leader: Option<LeaderUuid>,
    pub term: u64,
    pub next_seq: Seq,
    pub first_seq: Seq,
    /// The configuration epoch: 0 from the journal's creation (the founding voters the registry
    /// placed it on), one more for each decided [`Control::Reconfigure`]
    /// (docs/reconfiguration.md, rule 1).
    pub epoch: u64,
    /// The voters of `epoch`, as its `Reconfigure` named them; `None` at epoch 0, whose voters
    /// are the founding ones.
    pub voters: Option<Voters>,
}

impl JournalState {
    /// What an answer reports: the state without the term.
    #[must_use]
    pub fn view(&self) -> JournalView {
        JournalView { leader: self.leader, first_seq: self.first_seq, next_seq: self.next_seq }
    }

    /// Panics unless the state's own invariants hold.
    pub fn assert_invariants(&self) {
        assert!(self.first_seq <= self.next_seq, "first_seq never passes next_seq: {self:?}");
        assert_eq!(self.leader.is_some(), self.term > 0, "a leader exists iff term > 0: {self:?}");
        assert_eq!(self.voters.is_some(), self.epoch > 0, "a decided configuration exists iff epoch > 0: {self:?}");
    }
}

/// The journal's leader and retained range, carried by every answer:
/// `{"leader", "first_seq", "next_seq"}`.
///
/// `leader` is `None` (`null` in JSON, where the field is required) for a journal never led, and
/// always for a multi-writer journal. Records `[first_seq, next_seq)` are retained. A view with
/// `first_seq > next_seq` is refused when deserialized, in any format: no server state looks
/// like that.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize)]
pub struct JournalView {
    pub leader: Option<LeaderUuid>,
    pub first_seq: Seq,
    pub next_seq: Seq,
}

impl JournalView {
    /// A new journal's view: no leader, nothing written.
    pub const NEW: JournalView = JournalView { leader: None, first_seq: Seq(0), next_seq: Seq(0) };
}

/// The wire shape, before its invariant is checked.
#[derive(Deserialize)]
#[serde(rename = "JournalView")]
struct ViewWire {
    #[serde(deserialize_with = "required")]
    leader: Option<LeaderUuid>,
    first_seq: Seq,
    next_seq: Seq,
}

/// Naming a `deserialize_with` function is what makes serde's derive report a missing `Option`
/// field as missing instead of reading it as `None`.
fn required<'de, D: Deserializer<'de>>(d: D) -> Result<Option<LeaderUuid>, D::Error> {
    Option::<LeaderUuid>::deserialize(d)
}

impl<'de> Deserialize<'de> for JournalView {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let w = if d.is_human_readable() { ViewWire::deserialize(ObjectOnly(d))? } else { ViewWire::deserialize(d)? };
        if w.first_seq > w.next_seq {
            return Err(serde::de::Error::custom(format_args!(
                "a view's first_seq ({}) never passes its next_seq ({})",
                w.first_seq, w.next_seq
            )));
        }
        Ok(JournalView { leader: w.leader, first_seq: w.first_seq, next_seq: w.next_seq })
    }
}

/// One client Write: `records` for positions `[seq, seq + len)`, in one slot.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Entry {
    /// The writer's fence; `None` for a multi-writer append.
    pub leader: Option<LeaderUuid>,
    pub seq: Seq,
    pub records: Vec<Bytes>,
}

impl Entry {
    /// The number of records in the batch.
    #[must_use]
    pub fn count(&self) -> u64 {
        self.records.len() as u64
    }

    /// The total record bytes in the batch.
    #[must_use]
    pub fn bytes(&self) -> u64 {
        self.records.iter().map(|r| r.len() as u64).sum()
    }
}

/// A log command that is not a write.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum Control {
    /// Drop every record below `up_to` (the first position the caller still needs).
    Truncate { leader: Option<LeaderUuid>, up_to: Seq },
    /// Compare-and-set the writer fence from `old` to `new`.
    SetLeader { new: LeaderUuid, old: Option<LeaderUuid> },
    /// Gap filler proposed by a new consensus leader: decides a slot, changes nothing.
    Noop,
    /// The stop-sign: every slot after this one is governed by `voters`, configuration `epoch`
    /// (docs/reconfiguration.md). Applied only when `epoch` is the state's epoch plus one; any
    /// other is refused in place, so a re-driven or repeated request is harmless.
    Reconfigure { epoch: u64, voters: Voters },
}

/// The most voters one journal has.
pub const VOTERS_MAX: usize = 7;

/// A journal's voters as a `Reconfigure` names them: one to [`VOTERS_MAX`] distinct machines.
/// Fixed-size, so [`JournalState`] stays `Copy`; encoded as a list, and checked when decoded.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "Vec<NodeId>", into = "Vec<NodeId>")]
pub struct Voters {
    len: u8,
    ids: [NodeId; VOTERS_MAX],
}

/// A list of machines that is no voter set.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum VotersError {
    #[error("a configuration has at least one voter")]
    Empty,
    #[error("a configuration has at most {VOTERS_MAX} voters, not {0}")]
    TooMany(usize),
    #[error("machine {0} is named twice")]
    Repeated(NodeId),
}

impl Voters {
    /// The voter set `ids`, in their order.
    ///
    /// # Errors
    /// An empty list, more than [`VOTERS_MAX`], or a machine named twice.
    pub fn new(ids: &[NodeId]) -> Result<Voters, VotersError> {
        if ids.is_empty() {
            return Err(VotersError::Empty);
        }
        if ids.len() > VOTERS_MAX {
            return Err(VotersError::TooMany(ids.len()));
        }
        let mut set = Voters { len: 0, ids: [NodeId(0); VOTERS_MAX] };
        for id in ids {
            if set.contains(*id) {
                return Err(VotersError::Repeated(*id));
            }
            set.ids[usize::from(set.len)] = *id;
            set.len += 1;
        }
        Ok(set)
    }

    #[must_use]
    pub fn as_slice(&self) -> &[NodeId] {
        &self.ids[..usize::from(self.len)]
    }

    #[must_use]
    pub fn contains(&self, id: NodeId) -> bool {
        self.as_slice().contains(&id)
    }
}

impl std::fmt::Debug for Voters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

impl TryFrom<Vec<NodeId>> for Voters {
    type Error = VotersError;
    fn try_from(ids: Vec<NodeId>) -> Result<Voters, VotersError> {
        Voters::new(&ids)
    }
}

impl From<Voters> for Vec<NodeId> {
    fn from(v: Voters) -> Vec<NodeId> {
        v.as_slice().to_vec()
    }
}

/// What one Paxos slot holds.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum Command {
    Write(Entry),
    Control(Control),
}

impl Command {
    /// The record bytes the command carries (a control command carries none).
    #[must_use]
    pub fn record_bytes(&self) -> u64 {
        match self {
            Command::Write(e) => e.bytes(),
            Command::Control(_) => 0,
        }
    }

    /// A 64-bit fingerprint over the whole command, so a leader can tell whether an
    /// `Accepted` names the command it proposed. Not a security boundary.
    #[must_use]
    pub fn digest(&self) -> u64 {
        let mut h = Mix::new();
        match self {
            Command::Write(e) => {
                h.u8(1);
                h.uuid(e.leader);
                h.u64(e.seq.0);
                h.u64(e.count());
                for r in &e.records {
                    h.u64(r.len() as u64);
                    h.bytes(r);
                }
            }
            Command::Control(Control::Truncate { leader, up_to }) => {
                h.u8(2);
                h.uuid(*leader);
                h.u64(up_to.0);
            }
            Command::Control(Control::SetLeader { new, old }) => {
                h.u8(3);
                h.uuid(Some(*new));
                h.uuid(*old);
            }
            Command::Control(Control::Noop) => h.u8(4),
            Command::Control(Control::Reconfigure { epoch, voters }) => {
                h.u8(5);
                h.u64(*epoch);
                h.u64(voters.as_slice().len() as u64);
                for v in voters.as_slice() {
                    h.u64(v.0);
                }
            }
        }
        h.0
    }

    /// A `Reconfigure` that ends configuration `epoch` (it names `epoch + 1`): a leader of
    /// `epoch` proposes nothing above it until it is applied (docs/reconfiguration.md, rule 3).
    /// Any other `Reconfigure` is refused by the fold and changes nothing: no stop-sign.
    #[must_use]
    pub fn ends_epoch(&self, epoch: u64) -> bool {
        matches!(self, Command::Control(Control::Reconfigure { epoch: next, .. }) if *next == epoch + 1)
    }

    /// For a `Reconfigure`, the configuration it names. Only a leader of the epoch before that
    /// one ever proposes it (rule 3 answers any other `StaleEpoch`), so one known chosen says
    /// the journal reached that leader's epoch (docs/reconfiguration.md, rule 12).
    #[must_use]
    pub fn names_epoch(&self) -> Option<u64> {
        match self {
            Command::Control(Control::Reconfigure { epoch, .. }) => Some(*epoch),
            _ => None,
        }
    }

    /// The records this command would append, if it is a write.
    #[must_use]
    pub fn entry(&self) -> Option<&Entry> {
        match self {
            Command::Write(e) => Some(e),
            Command::Control(_) => None,
        }
    }
}

/// A command with its [digest](Command::digest), computed once when the command is made (a
/// leader proposing it) or arrives (decoded from the wire, learned, read back at boot) and
/// carried with it from then on, so no role hashes the same records twice.
///
/// On the wire it is the bare command: serializing writes only the command, and decoding one
/// computes its digest. The fields are private, so the digest carried is always the command's.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Digested {
    command: Command,
    digest: u64,
}

impl Digested {
    /// `command` with its digest, computed here.
    #[must_use]
    pub fn new(command: Command) -> Digested {
        let digest = command.digest();
        Digested { command, digest }
    }

    #[must_use]
    pub fn command(&self) -> &Command {
        &self.command
    }

    /// The digest of [`command`](Self::command), as [`Command::digest`] gives it.
    #[must_use]
    pub fn digest(&self) -> u64 {
        self.digest
    }

    #[must_use]
    pub fn into_command(self) -> Command {
        self.command
    }
}

impl From<Command> for Digested {
    fn from(command: Command) -> Digested {
        Digested::new(command)
    }
}

impl Serialize for Digested {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.command.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Digested {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Digested, D::Error> {
        Command::deserialize(deserializer).map(Digested::new)
    }
}

/// A word-at-a-time mixing hash: fast over record bytes, not a security boundary.
struct Mix(u64);

impl Mix {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;

    fn new() -> Mix {
        Mix(0xcbf2_9ce4_8422_2325)
    }
    fn word(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(23) ^ w).wrapping_mul(Self::K);
    }
    fn bytes(&mut self, b: &[u8]) {
        let mut chunks = b.chunks_exact(8);
        for c in &mut chunks {
            self.word(u64::from_le_bytes(c.try_into().expect("eight bytes")));
        }
        let mut tail = [0u8; 8];
        let rest = chunks.remainder();
        tail[..rest.len()].copy_from_slice(rest);
        self.word(u64::from_le_bytes(tail) ^ ((rest.len() as u64) << 59));
    }
    fn u8(&mut self, x: u8) {
        self.word(u64::from(x));
    }
    fn u64(&mut self, x: u64) {
        self.word(x);
    }
    fn uuid(&mut self, x: Option<LeaderUuid>) {
        let v = x.map_or(0, LeaderUuid::get);
        self.word(v as u64);
        self.word((v >> 64) as u64);
    }
}

/// The verdict the fold gives one slot's command.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum Outcome {
    /// The batch took `[seq, seq + count)`; `view` is the journal's right after it (its
    /// `next_seq` is `seq + count`), so a writer learns the tail without asking again.
    Accepted { seq: Seq, count: u64, view: JournalView },
    /// A byte-identical retry of the write accepted at `seq`: acknowledged, nothing moved;
    /// `view` is the one it was judged against.
    Duplicate { seq: Seq, count: u64, view: JournalView },
    /// Refused in place; the view it was judged against.
    Refused(JournalView),
    /// The write starts below `first_seq`: whether it was ever accepted is unknowable here.
    Truncated(JournalView),
    /// The call is shaped for the other writer mode.
    WrongMode(JournalView),
    /// SetLeader won; the view after it.
    Won(JournalView),
    /// SetLeader lost its compare-and-set; the view it was judged against.
    Lost(JournalView),
    /// Truncate applied; the view after it.
    Trimmed(JournalView),
    /// Truncate from a caller that is not the writer in force.
    TruncateRefused(JournalView),
    /// A gap filler.
    Noop,
    /// A `Reconfigure` applied: the journal's configuration is now `epoch`.
    Reconfigured { epoch: u64, view: JournalView },
    /// A `Reconfigure` that does not follow the configuration in force (`epoch`, the state's):
    /// refused in place.
    StaleEpoch { epoch: u64, view: JournalView },
}

impl Outcome {
    /// The view the verdict carries: every verdict but a gap filler's.
    #[must_use]
    pub fn view(&self) -> Option<JournalView> {
        match *self {
            Outcome::Accepted { view: v, .. }
            | Outcome::Duplicate { view: v, .. }
            | Outcome::Refused(v)
            | Outcome::Truncated(v)
            | Outcome::WrongMode(v)
            | Outcome::Won(v)
            | Outcome::Lost(v)
            | Outcome::Trimmed(v)
            | Outcome::TruncateRefused(v)
            | Outcome::Reconfigured { view: v, .. }
            | Outcome::StaleEpoch { view: v, .. } => Some(v),
            Outcome::Noop => None,
        }
    }
}

/// Batch limits, judged before anything is proposed.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Limits {
    pub write_records_max: u32,
    pub write_bytes_max: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { write_records_max: 1024, write_bytes_max: 1 << 20 }
    }
}

/// A write over the batch limits; names both limits of the node that judged it.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize, thiserror::Error)]
#[error("batch over the limits: at most {max_records} records and {max_bytes} bytes")]
pub struct TooLarge {
    pub max_records: u32,
    pub max_bytes: u64,
}

impl Limits {
    /// Judges a write's size before it is proposed.
    ///
    /// # Errors
    /// [`TooLarge`] naming both limits when the batch has too many records or bytes.
    pub fn check(&self, entry: &Entry) -> Result<(), TooLarge> {
        if entry.count() > u64::from(self.write_records_max) || entry.bytes() > self.write_bytes_max {
            return Err(TooLarge { max_records: self.write_records_max, max_bytes: self.write_bytes_max });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::{Command, Control, Digested, Entry, JournalState, JournalView, Limits, TooLarge, Voters, VotersError};
    use crate::ids::{LeaderUuid, NodeId, Seq};

    #[test]
    fn postcard_carries_a_view_as_its_raw_fields_and_refuses_what_json_refuses() {
        let led = JournalView { leader: LeaderUuid::new(0xab), first_seq: Seq(3), next_seq: Seq(10) };
        let bytes = postcard::to_stdvec(&led).unwrap();
        assert_eq!(bytes, postcard::to_stdvec(&(Some(0xab_u128), 3_u64, 10_u64)).unwrap(), "the uuid is the u128");
        assert_eq!(postcard::from_bytes::<JournalView>(&bytes).unwrap(), led);
        let passed = postcard::to_stdvec(&(None::<u128>, 5_u64, 4_u64)).unwrap();
        assert!(postcard::from_bytes::<JournalView>(&passed).is_err(), "first_seq > next_seq");
        let zero = postcard::to_stdvec(&(Some(0_u128), 0_u64, 0_u64)).unwrap();
        assert!(postcard::from_bytes::<JournalView>(&zero).is_err(), "a zero leader uuid");
    }

    #[test]
    fn a_view_is_a_json_object_whose_leader_is_required_and_nullable() {
        let led = JournalView { leader: LeaderUuid::new(0xab), first_seq: Seq(3), next_seq: Seq(10) };
        let json = r#"{"leader":"00000000-0000-0000-0000-0000000000ab","first_seq":3,"next_seq":10}"#;
        assert_eq!(serde_json::to_string(&led).unwrap(), json);
        assert_eq!(serde_json::from_str::<JournalView>(json).unwrap(), led);
        let new = r#"{"leader":null,"first_seq":0,"next_seq":0}"#;
        assert_eq!(serde_json::to_string(&JournalView::NEW).unwrap(), new);
        assert_eq!(serde_json::from_str::<JournalView>(new).unwrap(), JournalView::NEW);
        for bad in [r#"{"first_seq":0,"next_seq":0}"#, "[null,0,0]", r#"{"leader":null,"first_seq":5,"next_seq":4}"#] {
            assert!(serde_json::from_str::<JournalView>(bad).is_err(), "{bad}");
        }
    }

    fn entry(records: Vec<Bytes>) -> Entry {
        Entry { leader: LeaderUuid::new(7), seq: Seq(0), records }
    }

    fn small() -> Limits {
        Limits { write_records_max: 3, write_bytes_max: 10 }
    }

    const BOTH: TooLarge = TooLarge { max_records: 3, max_bytes: 10 };

    #[test]
    fn a_batch_exactly_at_both_limits_passes() {
        let records = vec![Bytes::from("abcd"), Bytes::from("efg"), Bytes::from("hij")];
        assert_eq!(small().check(&entry(records)), Ok(()));
    }

    #[test]
    fn a_batch_over_the_record_limit_is_too_large_naming_both_limits() {
        let records = vec![Bytes::from("a"); 4];
        assert_eq!(small().check(&entry(records)), Err(BOTH));
    }

    #[test]
    fn a_batch_over_the_byte_limit_is_too_large_naming_both_limits() {
        let records = vec![Bytes::from("0123456789X")];
        assert_eq!(small().check(&entry(records)), Err(BOTH));
    }

    #[test]
    fn the_default_limits_are_1024_records_and_one_mib() {
        let limits = Limits::default();
        assert_eq!(limits.check(&entry(vec![Bytes::from_static(b"r"); 1024])), Ok(()));
        let over = TooLarge { max_records: 1024, max_bytes: 1 << 20 };
        assert_eq!(limits.check(&entry(vec![Bytes::from_static(b"r"); 1025])), Err(over));
        assert_eq!(limits.check(&entry(vec![Bytes::from(vec![0u8; (1 << 20) + 1])])), Err(over));
    }

    #[test]
    fn a_too_large_answer_says_both_limits_in_words() {
        assert_eq!(BOTH.to_string(), "batch over the limits: at most 3 records and 10 bytes");
    }

    #[test]
    fn the_digest_tells_apart_writes_that_differ_only_in_record_boundaries_or_fence() {
        let one = Command::Write(entry(vec![Bytes::from("ab")]));
        let two = Command::Write(entry(vec![Bytes::from("a"), Bytes::from("b")]));
        let unfenced = Command::Write(Entry { leader: None, ..entry(vec![Bytes::from("ab")]) });
        let later = Command::Write(Entry { seq: Seq(1), ..entry(vec![Bytes::from("ab")]) });
        let digests = [one.digest(), two.digest(), unfenced.digest(), later.digest()];
        for (i, a) in digests.iter().enumerate() {
            for b in &digests[i + 1..] {
                assert_ne!(a, b, "{digests:x?}");
            }
        }
        assert_eq!(one.digest(), one.clone().digest(), "the digest is a function of the command");
    }

    #[test]
    fn the_digest_tells_control_commands_apart() {
        let a = LeaderUuid::new(1).expect("non-zero");
        let b = LeaderUuid::new(2).expect("non-zero");
        let commands = [
            Command::Control(Control::Noop),
            Command::Control(Control::SetLeader { new: a, old: None }),
            Command::Control(Control::SetLeader { new: a, old: Some(b) }),
            Command::Control(Control::SetLeader { new: b, old: Some(a) }),
            Command::Control(Control::Truncate { leader: Some(a), up_to: Seq(0) }),
            Command::Control(Control::Truncate { leader: None, up_to: Seq(0) }),
            Command::Control(Control::Truncate { leader: Some(a), up_to: Seq(1) }),
            reconfigure(1, &[1, 2, 3]),
            reconfigure(2, &[1, 2, 3]),
            reconfigure(1, &[1, 2, 4]),
            reconfigure(1, &[2, 1, 3]),
            reconfigure(1, &[1, 2]),
        ];
        let digests: Vec<u64> = commands.iter().map(Command::digest).collect();
        for (i, x) in digests.iter().enumerate() {
            for y in &digests[i + 1..] {
                assert_ne!(x, y, "{commands:?}");
            }
        }
    }

    fn reconfigure(epoch: u64, voters: &[u64]) -> Command {
        let voters: Vec<NodeId> = voters.iter().map(|v| NodeId(*v)).collect();
        Command::Control(Control::Reconfigure { epoch, voters: Voters::new(&voters).expect("a voter set") })
    }

    #[test]
    fn a_voter_set_is_one_to_seven_distinct_machines_checked_as_it_decodes() {
        let ids = |n: u64| (1..=n).map(NodeId).collect::<Vec<_>>();
        assert_eq!(Voters::new(&[]), Err(VotersError::Empty));
        assert_eq!(Voters::new(&ids(8)), Err(VotersError::TooMany(8)));
        assert_eq!(Voters::new(&[NodeId(3), NodeId(5), NodeId(3)]), Err(VotersError::Repeated(NodeId(3))));
        let seven = Voters::new(&ids(7)).expect("seven");
        assert_eq!(seven.as_slice(), ids(7).as_slice(), "kept in the order named");
        assert!(seven.contains(NodeId(7)) && !seven.contains(NodeId(8)));
        let bytes = postcard::to_allocvec(&seven).expect("encodes");
        assert_eq!(postcard::from_bytes::<Voters>(&bytes), Ok(seven));
        // Decoding goes through the same checks: a list with a repeat is no voter set.
        let repeated = postcard::to_allocvec(&vec![NodeId(2), NodeId(2)]).expect("encodes");
        assert!(postcard::from_bytes::<Voters>(&repeated).is_err());
        let eight = postcard::to_allocvec(&ids(8)).expect("encodes");
        assert!(postcard::from_bytes::<Voters>(&eight).is_err());
    }

    #[test]
    fn a_digested_command_carries_the_digest_of_its_own_command() {
        let a = LeaderUuid::new(1).expect("non-zero");
        let commands = [
            Command::Write(entry(vec![Bytes::from("ab"), Bytes::from("cdefghijk")])),
            Command::Control(Control::Noop),
            Command::Control(Control::SetLeader { new: a, old: None }),
            Command::Control(Control::Truncate { leader: Some(a), up_to: Seq(3) }),
            reconfigure(4, &[9, 8, 7]),
        ];
        for command in commands {
            let digested = Digested::new(command.clone());
            assert_eq!(digested.digest(), command.digest(), "{command:?}");
            assert_eq!(Digested::from(command.clone()), digested);
            assert_eq!(digested.into_command(), command);
        }
    }

    #[test]
    #[should_panic(expected = "a leader exists iff term > 0")]
    fn a_state_naming_a_leader_at_term_zero_breaks_the_invariants() {
        JournalState { leader: LeaderUuid::new(1), ..JournalState::default() }.assert_invariants();
    }

    #[test]
    #[should_panic(expected = "first_seq never passes next_seq")]
    fn a_state_with_first_seq_past_next_seq_breaks_the_invariants() {
        JournalState { first_seq: Seq(2), next_seq: Seq(1), ..JournalState::default() }.assert_invariants();
    }

    #[test]
    fn the_unset_uuid_never_leads() {
        assert_eq!(LeaderUuid::new(0), None);
    }
}
