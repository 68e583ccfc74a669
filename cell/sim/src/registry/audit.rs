//! The registry's claims, checked from what the registry's readers and coordinators report.
//!
//! - "every registry reader folds the same directory": every whole fold that reaches a position
//!   encodes to the same directory there, and every reader read the same record at a position;
//! - "a checkpoint run without End is never restored": a restore names a run whose `Begin`,
//!   chunks and `End` (count and checksum) the reader itself read;
//! - "a reader below the floor restores from the checkpoint at the floor": after a gap resumed
//!   at `F`, the record at `F` opens a run and the next restore is that run's;
//! - "the registry coordinator is fenced by its successor": once a claim `SetLeader(new, old)`
//!   won with the tail at `t`, no write under `old` is acknowledged past `t`, and a coordinator
//!   that learns it was superseded names a leader some later claim set.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};

use bytes::Bytes;
use paros_client::{Checkpointable, FoldEvent, JournalView, RunRecord, Seq};
use paros_core::LeaderUuid;
use paros_registry::Directory;

use crate::check::{Claim, Claims};

/// The registry's figures for one run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RegistryFigures {
    /// The longest retained range any answer named: `next_seq - first_seq`, in records.
    pub retained_records_max: u64,
    /// The bytes of that range's records, where known (the largest seen).
    pub retained_bytes_max: u64,
    /// The largest encoded directory a reader folded.
    pub state_bytes_max: u64,
    /// The bytes of the largest checkpoint run read.
    pub run_bytes_max: u64,
    /// Checkpoint runs planned and truncations asked, over every coordinator.
    pub runs_planned: u64,
    pub truncations: u64,
    /// Coordinators that won a claim, and the commands they saw decided.
    pub coordinators: u64,
    pub verdicts: u64,
}

impl RegistryFigures {
    /// The bound the retained bytes must stay under: four states and one run.
    #[must_use]
    pub fn bound_bytes(&self) -> u64 {
        4 * self.state_bytes_max + self.run_bytes_max
    }

    /// Whether the retained bytes stayed under [`bound_bytes`](Self::bound_bytes).
    #[must_use]
    pub fn bounded(&self) -> bool {
        self.retained_bytes_max <= self.bound_bytes()
    }
}

/// The evidence about the registry gathered so far.
#[derive(Debug, Default)]
pub struct RegistryAudit {
    /// The digest of the directory at each folded position (`next`), first reported.
    digests: BTreeMap<u64, u64>,
    /// The record at each position, as first read.
    records: BTreeMap<u64, Bytes>,
    /// Readers that jumped over a gap and wait to restore: the floor they resumed at.
    awaiting: BTreeMap<String, u64>,
    /// For each superseded uuid: its successor and the tail when the successor won.
    successor: BTreeMap<LeaderUuid, (LeaderUuid, u64)>,
    /// Every uuid a claim was sent for.
    claimed: BTreeSet<LeaderUuid>,
    /// The end of the highest write acknowledged under each uuid.
    written_end: BTreeMap<LeaderUuid, u64>,
    pub figures: RegistryFigures,
}

fn digest(bytes: &[u8]) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

impl RegistryAudit {
    /// `reader` read `records` from `from`.
    pub fn on_records(&mut self, claims: &mut Claims, reader: &str, from: Seq, records: &[Bytes]) {
        for (i, r) in records.iter().enumerate() {
            let at = from.0 + i as u64;
            match self.records.get(&at) {
                Some(prev) => {
                    let same = prev == r;
                    claims.check(Claim::RegistrySameDirectory, same, || {
                        format!(
                            "registry seq{at}: {reader} read {} bytes where another reader read {}",
                            r.len(),
                            prev.len()
                        )
                    });
                }
                None => {
                    self.records.insert(at, r.clone());
                }
            }
        }
    }

    /// An answer named the registry's retained range.
    pub fn on_view(&mut self, view: JournalView) {
        let (first, next) = (view.first_seq.0, view.next_seq.0);
        let f = &mut self.figures;
        f.retained_records_max = f.retained_records_max.max(next.saturating_sub(first));
        let bytes: u64 = self.records.range(first..next).map(|(_, r)| r.len() as u64).sum();
        f.retained_bytes_max = f.retained_bytes_max.max(bytes);
    }

    /// `reader`'s folder is at `next` (whole or not), holding `directory`.
    pub fn on_folded(&mut self, claims: &mut Claims, reader: &str, next: Seq, whole: bool, directory: &Directory) {
        if !whole {
            return;
        }
        let bytes = directory.checkpoint();
        self.figures.state_bytes_max = self.figures.state_bytes_max.max(bytes.len() as u64);
        let d = digest(&bytes);
        match self.digests.get(&next.0) {
            Some(first) => {
                let same = *first == d;
                claims.check(Claim::RegistrySameDirectory, same, || {
                    format!("registry seq{}: {reader} folded a directory that differs from another reader's", next.0)
                });
                if same {
                    claims.reach(Claim::RegistrySameDirectory);
                }
            }
            None => {
                self.digests.insert(next.0, d);
            }
        }
    }

    /// `reader`'s folder reported `events`.
    pub fn on_events(&mut self, claims: &mut Claims, reader: &str, events: &[FoldEvent]) {
        for event in events {
            match event {
                FoldEvent::Jumped { to, .. } => {
                    self.awaiting.insert(reader.to_owned(), to.0);
                }
                FoldEvent::Skipped { at } | FoldEvent::Applied { at } if self.awaiting.get(reader) == Some(&at.0) => {
                    let at = at.0;
                    claims.check(Claim::RegistryRestoresAtFloor, false, || {
                        format!(
                            "{reader} jumped to the floor seq{at}, where an application record sits, not a run's Begin"
                        )
                    });
                    self.awaiting.remove(reader);
                }
                FoldEvent::Restored { at } => {
                    self.check_run(claims, reader, at.0);
                    let floor = self.awaiting.remove(reader);
                    let ok = floor == Some(at.0);
                    claims.check(Claim::RegistryRestoresAtFloor, ok, || {
                        format!("{reader} restored from the run at seq{} after jumping to {floor:?}", at.0)
                    });
                    if ok {
                        claims.reach(Claim::RegistryRestoresAtFloor);
                    }
                }
                _ => {}
            }
        }
    }

    /// A restore from the run opened at `begin`: its records, as read, are a whole run.
    fn check_run(&mut self, claims: &mut Claims, reader: &str, begin: u64) {
        let mut why = None;
        match self.records.get(&begin).map(|r| RunRecord::decode(r)) {
            Some(Ok(RunRecord::Begin { covers_up_to })) if covers_up_to.0 == begin => {}
            other => why = Some(format!("the record at the run's start is {other:?}")),
        }
        let mut state = Vec::new();
        let mut chunks = 0u64;
        let mut at = begin + 1;
        let mut ended = false;
        while why.is_none() && !ended {
            match self.records.get(&at).map(|r| RunRecord::decode(r)) {
                Some(Ok(RunRecord::Chunk(bytes))) => {
                    chunks += 1;
                    state.extend_from_slice(&bytes);
                }
                Some(Ok(RunRecord::End { chunks: declared, checksum })) => {
                    if declared != chunks || checksum != paros_client::run::checksum(&state) {
                        why = Some(format!("its End at seq{at} does not close its {chunks} chunks"));
                    }
                    ended = true;
                }
                None => why = Some(format!("no End was read (nothing at seq{at})")),
                Some(other) => why = Some(format!("seq{at} holds {other:?} before any End")),
            }
            at += 1;
        }
        let run_bytes: u64 = self.records.range(begin..at).map(|(_, r)| r.len() as u64).sum();
        self.figures.run_bytes_max = self.figures.run_bytes_max.max(run_bytes);
        claims.check(Claim::RunWithoutEndNeverRestored, why.is_none(), || {
            format!("{reader} restored from the run at seq{begin}: {}", why.clone().unwrap_or_default())
        });
        if why.is_none() {
            claims.reach(Claim::RunWithoutEndNeverRestored);
        }
    }

    /// A coordinator sent the claim `SetLeader(new, _)`.
    pub fn on_claim_sent(&mut self, new: LeaderUuid) {
        self.claimed.insert(new);
    }

    /// The claim `SetLeader(new, old)` won with the journal's tail at `tail`.
    pub fn on_won(&mut self, claims: &mut Claims, new: LeaderUuid, old: Option<LeaderUuid>, tail: Seq) {
        self.figures.coordinators += 1;
        let Some(old) = old else { return };
        self.successor.insert(old, (new, tail.0));
        if let Some(end) = self.written_end.get(&old).copied() {
            claims.check(Claim::RegistryCoordinatorFenced, end <= tail.0, || {
                format!(
                    "a registry write under {old:?} was acknowledged up to seq{end}, past seq{} where {new:?} claimed",
                    tail.0
                )
            });
        }
    }

    /// A write of `count` records at `seq` under `uuid` was acknowledged.
    pub fn on_written(&mut self, claims: &mut Claims, uuid: LeaderUuid, seq: Seq, count: u64) {
        let end = seq.0 + count;
        let e = self.written_end.entry(uuid).or_insert(0);
        *e = (*e).max(end);
        if let Some((new, tail)) = self.successor.get(&uuid).copied() {
            claims.check(Claim::RegistryCoordinatorFenced, end <= tail, || {
                format!(
                    "a registry write under {uuid:?} was acknowledged up to seq{end}, \
                     past seq{tail} where {new:?} claimed"
                )
            });
        }
    }

    /// The coordinator under `uuid` learned from `view` that it was superseded.
    pub fn on_superseded(&mut self, claims: &mut Claims, uuid: LeaderUuid, view: JournalView) {
        let ok = view.leader.is_some_and(|l| l != uuid && self.claimed.contains(&l));
        claims.check(Claim::RegistryCoordinatorFenced, ok, || {
            format!("the registry coordinator {uuid:?} was superseded by {:?}, which no claim set", view.leader)
        });
        if ok {
            claims.reach(Claim::RegistryCoordinatorFenced);
        }
    }
}

#[cfg(test)]
mod tests {
    //! The teeth: each registry claim fails on a history that breaks it.
    use super::*;
    use paros_client::Checkpointer;
    use paros_client::CheckpointerConfig;

    fn uuid(n: u128) -> LeaderUuid {
        LeaderUuid::new(n).expect("non-zero")
    }

    fn app(n: u8) -> Bytes {
        Bytes::from(vec![1, n])
    }

    /// A whole run of `Directory::new()` at `begin`.
    fn run_at(begin: u64) -> Vec<Bytes> {
        let config = CheckpointerConfig { chunk_bytes: 4, ..CheckpointerConfig::default() };
        let mut c = Checkpointer::new(config).expect("a valid config");
        c.begin(&Directory::new(), Seq(begin)).expect("a run").records
    }

    #[test]
    fn two_readers_folding_different_directories_at_one_position_violate_the_same_directory() {
        let mut claims = Claims::default();
        let mut a = RegistryAudit::default();
        a.on_folded(&mut claims, "n1", Seq(3), true, &Directory::new());
        a.on_folded(&mut claims, "n2", Seq(3), true, &Directory::new());
        assert_eq!(claims.count(Claim::RegistrySameDirectory).violated, 0);
        let mut other = Directory::new();
        other.apply_record(Seq(0), b"not a record");
        a.on_folded(&mut claims, "n3", Seq(3), true, &other);
        assert_eq!(claims.count(Claim::RegistrySameDirectory).violated, 1, "a different directory at seq3 is caught");
        a.on_records(&mut claims, "n1", Seq(7), &[app(1)]);
        a.on_records(&mut claims, "n2", Seq(7), &[app(2)]);
        assert_eq!(claims.count(Claim::RegistrySameDirectory).violated, 2, "a different record at seq7 is caught");
    }

    #[test]
    fn restoring_a_run_without_its_end_violates_the_claim() {
        let mut claims = Claims::default();
        let mut a = RegistryAudit::default();
        let run = run_at(10);
        assert!(run.len() >= 3, "Begin, a chunk, End");
        let cut = &run[..run.len() - 1];
        a.on_records(&mut claims, "n1", Seq(10), cut);
        a.on_records(&mut claims, "n1", Seq(10 + cut.len() as u64), &[app(1)]);
        a.on_events(
            &mut claims,
            "n1",
            &[FoldEvent::Jumped { from: Seq(0), to: Seq(10) }, FoldEvent::Restored { at: Seq(10) }],
        );
        assert_eq!(claims.count(Claim::RunWithoutEndNeverRestored).violated, 1, "a restore with no End read is caught");
        let mut claims = Claims::default();
        let mut a = RegistryAudit::default();
        a.on_records(&mut claims, "n1", Seq(10), &run);
        a.on_events(
            &mut claims,
            "n1",
            &[FoldEvent::Jumped { from: Seq(0), to: Seq(10) }, FoldEvent::Restored { at: Seq(10) }],
        );
        let c = claims.count(Claim::RunWithoutEndNeverRestored);
        assert_eq!((c.violated, c.reached), (0, 1), "a whole run restores");
    }

    #[test]
    fn restoring_from_a_run_other_than_the_floors_violates_the_claim() {
        let mut claims = Claims::default();
        let mut a = RegistryAudit::default();
        let mut late = run_at(20);
        a.on_records(&mut claims, "n1", Seq(20), &late);
        a.on_events(
            &mut claims,
            "n1",
            &[FoldEvent::Jumped { from: Seq(0), to: Seq(10) }, FoldEvent::Restored { at: Seq(20) }],
        );
        assert_eq!(
            claims.count(Claim::RegistryRestoresAtFloor).violated,
            1,
            "a restore past the floor's run is caught"
        );
        a.on_events(
            &mut claims,
            "n2",
            &[FoldEvent::Jumped { from: Seq(0), to: Seq(30) }, FoldEvent::Skipped { at: Seq(30) }],
        );
        assert_eq!(
            claims.count(Claim::RegistryRestoresAtFloor).violated,
            2,
            "an application record at the floor is caught"
        );
        late = run_at(40);
        a.on_records(&mut claims, "n3", Seq(40), &late);
        a.on_events(
            &mut claims,
            "n3",
            &[FoldEvent::Jumped { from: Seq(0), to: Seq(40) }, FoldEvent::Restored { at: Seq(40) }],
        );
        assert_eq!(claims.count(Claim::RegistryRestoresAtFloor).reached, 1, "the floor's run restores");
    }

    #[test]
    fn a_write_of_a_fenced_coordinator_past_its_successors_claim_violates_the_fence() {
        let mut claims = Claims::default();
        let mut a = RegistryAudit::default();
        a.on_claim_sent(uuid(1));
        a.on_won(&mut claims, uuid(1), None, Seq(0));
        a.on_written(&mut claims, uuid(1), Seq(0), 4);
        a.on_claim_sent(uuid(2));
        a.on_won(&mut claims, uuid(2), Some(uuid(1)), Seq(4));
        a.on_written(&mut claims, uuid(1), Seq(2), 2);
        assert_eq!(
            claims.count(Claim::RegistryCoordinatorFenced).violated,
            0,
            "a write below the successor's tail is fine"
        );
        a.on_written(&mut claims, uuid(1), Seq(4), 1);
        assert_eq!(
            claims.count(Claim::RegistryCoordinatorFenced).violated,
            1,
            "a write past the successor's claim is caught"
        );
        let view = JournalView { leader: Some(uuid(2)), first_seq: Seq(0), next_seq: Seq(4) };
        a.on_superseded(&mut claims, uuid(1), view);
        assert_eq!(claims.count(Claim::RegistryCoordinatorFenced).reached, 1);
        let stranger = JournalView { leader: Some(uuid(9)), ..view };
        a.on_superseded(&mut claims, uuid(2), stranger);
        assert_eq!(
            claims.count(Claim::RegistryCoordinatorFenced).violated,
            2,
            "a supersede by a leader no claim set is caught"
        );
    }
}
