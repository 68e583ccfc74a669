//! The proposer's rules, one test each, calling `Proposer` and `merge_promises` directly.

use std::collections::BTreeMap;

use bytes::Bytes;
use paros_core::journal::{Command, Control, Digested, Entry, WriterMode};
use paros_core::message::Reported;
use paros_core::{
    Ballot, Elected, JournalConfig, LeaderUuid, Merged, Message, NodeId, Outbound, Proposer, Seq, Slot, Tunables,
    merge_promises,
};

const NOOP: Command = Command::Control(Control::Noop);

fn node(i: u64) -> NodeId {
    NodeId(0x100 + i)
}

fn ballot(round: u64) -> Ballot {
    Ballot { round, node: node(9) }
}

fn write(tag: &str) -> Command {
    Command::Write(Entry { leader: LeaderUuid::new(0xa), seq: Seq(0), records: vec![Bytes::from(tag.to_owned())] })
}

fn config(voters: u64, learners: u64) -> JournalConfig {
    JournalConfig {
        mode: WriterMode::Single,
        voters: (1..=voters).map(node).collect(),
        learners: (0..learners).map(|i| node(50 + i)).collect(),
    }
}

fn reported(slot: u64, round: Option<u64>, command: &Command) -> Reported {
    Reported { slot: Slot(slot), ballot: round.map(ballot), command: command.clone() }
}

type Promises = BTreeMap<NodeId, (Slot, Vec<Reported>)>;

fn promises(each: Vec<(u64, u64, Vec<Reported>)>) -> Promises {
    each.into_iter().map(|(n, chosen, r)| (node(n), (Slot(chosen), r))).collect()
}

/// Node 1 campaigning at a ballot above `promised`, from `chosen_up_to`.
fn candidate(cfg: &JournalConfig, promised: Ballot, chosen_up_to: Slot) -> (Proposer, Vec<Outbound>) {
    let tunables = Tunables::default();
    let mut proposer = Proposer::new(node(1), 7, &tunables);
    let mut out = Vec::new();
    assert!(proposer.campaign(cfg, &tunables, promised, chosen_up_to, 0, &mut out), "campaigns in epoch 0");
    (proposer, out)
}

/// Node 1 leading `cfg` from slot 0 with nothing to re-propose.
fn leader(cfg: &JournalConfig) -> Proposer {
    let (mut proposer, _) = candidate(cfg, Ballot::ZERO, Slot(0));
    let b = proposer.ballot();
    let mut elected = Elected::NotYet;
    for v in cfg.voters.iter().take(cfg.quorum()) {
        elected = proposer.on_promise(cfg, &Tunables::default(), *v, b, Slot(0), Vec::new(), 0, Slot(0));
    }
    assert_eq!(elected, Elected::Won { learn_from: None });
    proposer
}

/// The commands each voter is asked to accept; each must carry its own digest.
fn accepts(out: &[Outbound]) -> Vec<(NodeId, Vec<(Slot, Command)>)> {
    let commands = |entries: &[(Slot, Digested)]| -> Vec<(Slot, Command)> {
        let carried = |c: &Digested| {
            assert_eq!(c.digest(), c.command().digest(), "an Accept carries its command's own digest");
            c.command().clone()
        };
        entries.iter().map(|(s, c)| (*s, carried(c))).collect()
    };
    out.iter()
        .filter_map(|o| match &o.message {
            Message::Accept { entries, .. } => Some((o.to, commands(entries))),
            _ => None,
        })
        .collect()
}

// ---- the P2c merge as a pure function ----

#[test]
fn the_merge_takes_the_value_of_the_highest_ballot_for_each_slot() {
    let (a, b, c) = (write("a"), write("b"), write("c"));
    // Slot 0: the highest ballot is reported by the middle node; slot 1: by the first.
    let merged = merge_promises(
        Slot(0),
        Slot(0),
        0,
        &promises(vec![
            (1, 0, vec![reported(0, Some(1), &a), reported(1, Some(5), &a)]),
            (2, 0, vec![reported(0, Some(3), &b), reported(1, Some(2), &b)]),
            (3, 0, vec![reported(0, Some(2), &c), reported(1, Some(4), &c)]),
        ]),
    );
    assert_eq!(
        merged.commands,
        vec![(Slot(0), b), (Slot(1), a)],
        "each slot re-proposes the value of its highest reported ballot"
    );
}

#[test]
fn the_merge_ranks_a_value_known_chosen_above_every_ballot() {
    let (chosen, high) = (write("chosen"), write("high"));
    let merged = merge_promises(
        Slot(0),
        Slot(0),
        0,
        &promises(vec![
            (1, 0, vec![reported(0, None, &chosen), reported(1, Some(9), &high)]),
            (2, 0, vec![reported(0, Some(9), &high), reported(1, Some(8), &high)]),
            (3, 0, vec![reported(1, None, &chosen)]),
        ]),
    );
    assert_eq!(
        merged.commands,
        vec![(Slot(0), chosen.clone()), (Slot(1), chosen)],
        "a value reported without a ballot wins, reported first or last"
    );
}

#[test]
fn the_merge_fills_each_undescribed_hole_below_the_highest_reported_slot_with_noop() {
    let (a, b) = (write("a"), write("b"));
    let merged = merge_promises(
        Slot(2),
        Slot(2),
        0,
        &promises(vec![(1, 2, vec![reported(3, Some(1), &a)]), (2, 2, vec![reported(6, Some(1), &b)])]),
    );
    assert_eq!(merged.start, Slot(2));
    assert_eq!(
        merged.commands,
        vec![(Slot(2), NOOP), (Slot(3), a), (Slot(4), NOOP), (Slot(5), NOOP), (Slot(6), b)],
        "every slot from the start to the highest reported one is proposed, holes as Noop"
    );
}

#[test]
fn the_merge_re_proposes_nothing_when_nothing_is_reported() {
    let merged = merge_promises(Slot(4), Slot(4), 0, &promises(vec![(1, 4, Vec::new()), (2, 3, Vec::new())]));
    assert_eq!(
        merged,
        Merged { start: Slot(4), commands: Vec::new(), ahead: None },
        "no value reported: nothing to re-propose"
    );
}

#[test]
fn the_merge_starts_at_the_furthest_of_the_campaign_start_our_prefix_and_the_acceptors_prefixes() {
    let a = write("a");
    let quorum = |chosen: u64| {
        promises(vec![(1, 0, vec![reported(3, Some(1), &a), reported(8, Some(1), &a)]), (2, chosen, Vec::new())])
    };
    assert_eq!(merge_promises(Slot(2), Slot(5), 0, &quorum(0)).start, Slot(5), "the campaign's start, when furthest");
    assert_eq!(merge_promises(Slot(6), Slot(5), 0, &quorum(0)).start, Slot(6), "our own prefix, when furthest");
    let merged = merge_promises(Slot(2), Slot(2), 0, &quorum(7));
    assert_eq!(merged.start, Slot(7), "an acceptor's chosen prefix, when furthest");
    assert_eq!(merged.commands, vec![(Slot(7), NOOP), (Slot(8), a)], "nothing below the start is re-proposed");
}

#[test]
fn the_merge_names_the_acceptor_furthest_ahead_of_our_prefix() {
    let quorum = promises(vec![(1, 4, Vec::new()), (2, 9, Vec::new()), (3, 7, Vec::new())]);
    assert_eq!(
        merge_promises(Slot(5), Slot(5), 0, &quorum).ahead,
        Some((node(2), Slot(9))),
        "the furthest chosen prefix, wherever it sits in the quorum"
    );
    assert_eq!(
        merge_promises(Slot(9), Slot(9), 0, &quorum).ahead,
        None,
        "no acceptor is ahead of a prefix that reaches theirs"
    );
}

// ---- campaigns ----

#[test]
fn a_campaign_prepares_every_voter_at_a_ballot_above_everything_seen() {
    let cfg = config(3, 0);
    let tunables = Tunables::default();
    let (mut proposer, out) = candidate(&cfg, Ballot { round: 5, node: node(3) }, Slot(4));
    assert_eq!(
        proposer.ballot(),
        Ballot { round: 6, node: node(1) },
        "above the acceptor's promise, in this node's name"
    );
    let expected: Vec<Outbound> = cfg
        .voters
        .iter()
        .map(|v| Outbound { to: *v, message: Message::Prepare { ballot: proposer.ballot(), from: Slot(4) } })
        .collect();
    assert_eq!(out, expected, "Phase 1 covers every slot from our chosen prefix, at every voter");
    assert!(proposer.is_candidate());

    proposer.on_nack(ballot(1), Ballot { round: 9, node: node(2) }, &tunables);
    proposer.campaign(&cfg, &tunables, Ballot::ZERO, Slot(4), 0, &mut Vec::new());
    assert_eq!(proposer.ballot().round, 10, "above a round heard in a Nack");

    proposer.observe_leader(node(2), Ballot { round: 12, node: node(2) }, &tunables);
    proposer.campaign(&cfg, &tunables, Ballot::ZERO, Slot(4), 0, &mut Vec::new());
    assert_eq!(proposer.ballot().round, 13, "above a round heard from a leader");

    proposer.campaign(&cfg, &tunables, Ballot::ZERO, Slot(4), 0, &mut Vec::new());
    assert_eq!(proposer.ballot().round, 14, "above our own last campaign");
}

#[test]
fn a_follower_campaigns_within_its_election_timeout_and_not_before() {
    let cfg = config(3, 0);
    let tunables = Tunables::default();
    let mut proposer = Proposer::new(node(1), 7, &tunables);
    for t in 1..tunables.election_ticks_min {
        assert!(
            !proposer.tick(&cfg, &tunables, Slot(0), true, &mut Vec::new()),
            "tick {t} is before the shortest election timeout"
        );
    }
    let fired = (tunables.election_ticks_min..tunables.election_ticks_max)
        .any(|_| proposer.tick(&cfg, &tunables, Slot(0), true, &mut Vec::new()));
    assert!(fired, "a follower that hears no leader campaigns before the longest election timeout");
}

#[test]
fn a_promise_for_another_ballot_is_ignored() {
    let cfg = config(3, 0);
    let (mut proposer, _) = candidate(&cfg, Ballot::ZERO, Slot(0));
    let other = Ballot { round: proposer.ballot().round + 1, ..proposer.ballot() };
    for v in [node(1), node(2), node(3)] {
        assert_eq!(
            proposer.on_promise(&cfg, &Tunables::default(), v, other, Slot(0), Vec::new(), 0, Slot(0)),
            Elected::NotYet,
            "a Promise for another ballot counts for nothing"
        );
    }
    assert!(proposer.is_candidate());
}

#[test]
fn a_campaign_is_won_at_exactly_a_quorum_of_distinct_promises() {
    let cfg = config(5, 0);
    let (mut proposer, _) = candidate(&cfg, Ballot::ZERO, Slot(0));
    let b = proposer.ballot();
    for v in [node(1), node(1), node(2), node(2)] {
        assert_eq!(
            proposer.on_promise(&cfg, &Tunables::default(), v, b, Slot(0), Vec::new(), 0, Slot(0)),
            Elected::NotYet,
            "two distinct promises are not a quorum of five"
        );
    }
    assert_eq!(
        proposer.on_promise(&cfg, &Tunables::default(), node(3), b, Slot(0), Vec::new(), 0, Slot(0)),
        Elected::Won { learn_from: None }
    );
    assert!(proposer.is_leader());
    assert_eq!(
        proposer.on_promise(&cfg, &Tunables::default(), node(4), b, Slot(0), Vec::new(), 0, Slot(0)),
        Elected::NotYet,
        "a leader is elected once"
    );
}

#[test]
fn a_won_campaign_re_proposes_the_merge_and_proposes_past_it() {
    let cfg = config(3, 0);
    let (mut proposer, _) = candidate(&cfg, Ballot::ZERO, Slot(1));
    let b = proposer.ballot();
    let (a, c) = (write("a"), write("c"));
    proposer.on_promise(
        &cfg,
        &Tunables::default(),
        node(2),
        b,
        Slot(1),
        vec![reported(1, Some(1), &a), reported(3, Some(1), &a)],
        0,
        Slot(1),
    );
    let elected = proposer.on_promise(
        &cfg,
        &Tunables::default(),
        node(3),
        b,
        Slot(2),
        vec![reported(2, Some(2), &c), reported(3, Some(2), &c)],
        0,
        Slot(1),
    );
    assert_eq!(
        elected,
        Elected::Won { learn_from: Some((node(3), Slot(2))) },
        "node 3's prefix is ahead of ours: learn from it"
    );
    assert_eq!(proposer.commit_point(), Slot(2), "slots below the merge's start are chosen");
    assert_eq!(proposer.propose(write("next").into()), Slot(4), "new proposals go past the re-proposed suffix");
    let mut out = Vec::new();
    proposer.flush(&cfg, Slot(1), &mut out);
    let expected = vec![(Slot(2), c.clone()), (Slot(3), c), (Slot(4), write("next"))];
    assert_eq!(
        accepts(&out),
        cfg.voters.iter().map(|v| (*v, expected.clone())).collect::<Vec<_>>(),
        "every voter is asked to accept the merge"
    );
}

// ---- Phase 2 ----

#[test]
fn an_ack_for_another_command_is_never_credited() {
    let cfg = config(3, 0);
    let mut proposer = leader(&cfg);
    let b = proposer.ballot();
    let (mine, other) = (write("mine"), write("other"));
    let slot = proposer.propose(mine.clone().into());
    for v in [node(2), node(3)] {
        assert!(
            proposer.on_accepted(&cfg, v, b, &[(slot, other.digest())]).is_empty(),
            "an ack naming another command is not a vote for ours"
        );
    }
    assert!(
        proposer.on_accepted(&cfg, node(1), b, &[(slot, mine.digest())]).is_empty(),
        "one matching ack is not a quorum"
    );
    assert_eq!(proposer.on_accepted(&cfg, node(2), b, &[(slot, mine.digest())]), vec![(slot, mine.into())]);
}

#[test]
fn an_ack_at_another_ballot_is_never_credited() {
    let cfg = config(3, 0);
    let mut proposer = leader(&cfg);
    let stale = Ballot { round: proposer.ballot().round - 1, ..proposer.ballot() };
    let command = write("mine");
    let slot = proposer.propose(command.clone().into());
    for v in [node(1), node(2), node(3)] {
        assert!(
            proposer.on_accepted(&cfg, v, stale, &[(slot, command.digest())]).is_empty(),
            "an ack at another ballot is old news"
        );
    }
}

#[test]
fn a_slot_is_chosen_at_exactly_a_quorum_of_distinct_acks_and_only_once() {
    let cfg = config(5, 0);
    let mut proposer = leader(&cfg);
    let b = proposer.ballot();
    let command = write("mine");
    let slot = proposer.propose(command.clone().into());
    let ack = [(slot, command.digest())];
    for v in [node(1), node(1), node(2), node(2)] {
        assert!(proposer.on_accepted(&cfg, v, b, &ack).is_empty(), "two distinct acks are not a quorum of five");
    }
    assert_eq!(
        proposer.on_accepted(&cfg, node(3), b, &ack),
        vec![(slot, command.into())],
        "the third distinct ack chooses the slot"
    );
    assert!(proposer.on_accepted(&cfg, node(4), b, &ack).is_empty(), "a slot is reported chosen once");
    assert_eq!(proposer.commit_point(), slot.next(), "nothing is in flight below the next slot");
}

#[test]
fn a_nack_naming_a_higher_promise_steps_a_leader_or_candidate_down() {
    let cfg = config(3, 0);
    let tunables = Tunables::default();
    let mut proposer = leader(&cfg);
    let b = proposer.ballot();
    assert!(
        proposer.on_nack(b, Ballot { round: b.round + 1, node: node(2) }, &tunables),
        "a higher promise ends the leadership"
    );
    assert!(!proposer.is_leader() && !proposer.is_candidate());
    assert_eq!(proposer.leader_hint(), None);

    let (mut proposer, _) = candidate(&cfg, Ballot::ZERO, Slot(0));
    let b = proposer.ballot();
    assert!(
        proposer.on_nack(b, Ballot { round: b.round + 1, node: node(2) }, &tunables),
        "a higher promise ends the campaign"
    );
    assert!(!proposer.is_candidate());
}

#[test]
fn a_stale_nack_or_a_nack_for_the_floor_does_not_step_down() {
    let cfg = config(3, 0);
    let tunables = Tunables::default();
    let mut proposer = leader(&cfg);
    let b = proposer.ballot();
    let older = Ballot { round: b.round - 1, ..b };
    assert!(
        !proposer.on_nack(older, Ballot { round: b.round + 5, node: node(2) }, &tunables),
        "a Nack for an older ballot is old news"
    );
    assert!(
        !proposer.on_nack(b, b, &tunables),
        "a Nack at our own promise refused a slot below a floor, not our ballot"
    );
    assert!(
        !proposer.on_nack(b, older, &tunables),
        "a Nack naming a lower promise refused a slot below a floor, not our ballot"
    );
    assert!(proposer.is_leader());
}

#[test]
fn a_leader_follows_only_a_leader_at_a_higher_ballot() {
    let cfg = config(3, 0);
    let tunables = Tunables::default();
    let mut proposer = leader(&cfg);
    let b = proposer.ballot();
    proposer.observe_leader(node(2), b, &tunables);
    proposer.observe_leader(node(2), Ballot { round: b.round - 1, node: node(3) }, &tunables);
    assert!(proposer.is_leader(), "a leader at a ballot not above ours is ignored");
    proposer.observe_leader(node(2), Ballot { round: b.round + 1, node: node(2) }, &tunables);
    assert!(!proposer.is_leader());
    assert_eq!(proposer.leader_hint(), Some(node(2)), "a leader at a higher ballot is followed");
}

#[test]
fn a_leader_that_hears_no_quorum_for_an_election_timeout_steps_down() {
    let cfg = config(3, 0);
    let tunables = Tunables::default();
    let mut proposer = leader(&cfg);
    for t in 1..=tunables.election_ticks_min {
        proposer.tick(&cfg, &tunables, Slot(0), false, &mut Vec::new());
        assert!(proposer.is_leader(), "tick {t}: every voter was heard within the window");
    }
    proposer.tick(&cfg, &tunables, Slot(0), false, &mut Vec::new());
    assert!(!proposer.is_leader(), "no voter heard for longer than the window: check-quorum steps down");
    assert_eq!(proposer.leader_hint(), None);
}

#[test]
fn a_leader_that_hears_a_quorum_keeps_leading() {
    let cfg = config(3, 0);
    let tunables = Tunables::default();
    let mut proposer = leader(&cfg);
    let b = proposer.ballot();
    for _ in 0..3 * tunables.election_ticks_max {
        proposer.on_heartbeat_ack(node(2), b, Slot(0));
        proposer.tick(&cfg, &tunables, Slot(0), false, &mut Vec::new());
    }
    assert!(proposer.is_leader(), "itself and one voter heard every tick are a quorum of three");
}

#[test]
fn a_leader_quiesces_once_every_voter_acknowledged_its_commit_whatever_its_replicas_do() {
    let cfg = config(3, 1);
    let tunables = Tunables::default();
    let mut proposer = leader(&cfg);
    let b = proposer.ballot();
    let commit = Slot(4);
    let quiescing =
        |out: &[Outbound]| out.iter().any(|o| matches!(o.message, Message::Heartbeat { quiesce: true, .. }));
    let tick = |proposer: &mut Proposer, lagging: Slot| {
        proposer.on_heartbeat_ack(node(2), b, commit);
        proposer.on_heartbeat_ack(node(3), b, lagging);
        let mut out = Vec::new();
        proposer.tick(&cfg, &tunables, commit, true, &mut out);
        out
    };
    for t in 0..20 {
        let out = tick(&mut proposer, Slot(3));
        assert!(
            !quiescing(&out) && !proposer.is_quiet(),
            "tick {t}: a voter behind the commit keeps the journal heartbeating"
        );
        assert!(
            out.iter().all(|o| cfg.voters.contains(&o.to)),
            "tick {t}: a leader heartbeats voters only, never a replica tier: {out:?}"
        );
    }
    for t in 1..3 {
        assert!(!quiescing(&tick(&mut proposer, commit)), "settled tick {t}: quiescence waits for three idle ticks");
    }
    let out = tick(&mut proposer, commit);
    assert!(
        quiescing(&out) && proposer.is_quiet(),
        "every voter acknowledged the commit for three idle ticks: quiesce, though no replica ever answered"
    );
}

#[test]
fn a_leader_with_work_in_flight_never_quiesces() {
    let cfg = config(3, 0);
    let tunables = Tunables::default();
    let mut proposer = leader(&cfg);
    let b = proposer.ballot();
    proposer.propose(write("pending").into());
    proposer.flush(&cfg, Slot(0), &mut Vec::new());
    for t in 0..20 {
        proposer.on_heartbeat_ack(node(2), b, Slot(0));
        proposer.on_heartbeat_ack(node(3), b, Slot(0));
        proposer.tick(&cfg, &tunables, Slot(0), true, &mut Vec::new());
        assert!(!proposer.is_quiet(), "tick {t}: a slot in flight keeps the leader awake");
    }
}

// ---- reconfiguration: the merge's stop-sign and epoch rules, a campaign's epoch ----

fn stop_sign(epoch: u64) -> Command {
    let voters = paros_core::journal::Voters::new(&[node(1), node(2), node(4)]).expect("voters");
    Command::Control(Control::Reconfigure { epoch, voters })
}

#[test]
fn a_stop_sign_no_higher_ballot_outranks_ends_the_re_proposals_there() {
    let (a, b) = (write("a"), write("b"));
    // The stop-sign at slot 1 (ballot 5); above it only values of lower ballots, never chosen.
    let merged = merge_promises(
        Slot(0),
        Slot(0),
        0,
        &promises(vec![
            (1, 0, vec![reported(0, Some(5), &a), reported(1, Some(5), &stop_sign(1)), reported(2, Some(3), &b)]),
            (2, 0, vec![reported(3, Some(4), &b)]),
        ]),
    );
    assert_eq!(merged.commands, vec![(Slot(0), a), (Slot(1), stop_sign(1))], "nothing above the stop-sign");
}

#[test]
fn a_stop_sign_outranked_by_a_value_above_it_was_never_chosen_and_becomes_a_noop() {
    let (a, b) = (write("a"), write("b"));
    let merged = merge_promises(
        Slot(0),
        Slot(0),
        0,
        &promises(vec![
            (1, 0, vec![reported(0, Some(3), &stop_sign(1))]),
            (2, 0, vec![reported(1, Some(6), &a), reported(2, Some(2), &b), reported(3, Some(7), &stop_sign(1))]),
        ]),
    );
    // Slot 0's stop-sign (ballot 3) is outranked by slot 1 (ballot 6); slot 3's (ballot 7) is
    // the highest: the re-proposals end there.
    assert_eq!(merged.commands, vec![(Slot(0), NOOP), (Slot(1), a), (Slot(2), b), (Slot(3), stop_sign(1))]);
}

#[test]
fn values_accepted_in_an_earlier_epoch_are_no_candidates_for_a_later_campaign() {
    let (old, new) = (write("old"), write("new"));
    let epoch1 = |round: u64| Ballot::epoch_start(1) + round;
    let merged = merge_promises(
        Slot(4),
        Slot(4),
        1,
        &promises(vec![
            (1, 4, vec![reported(4, Some(9), &old), reported(5, Some(epoch1(2)), &new), reported(6, Some(9), &old)]),
            (2, 4, vec![]),
        ]),
    );
    assert_eq!(merged.commands, vec![(Slot(4), NOOP), (Slot(5), new)], "epoch 0's values are dropped");
    assert_eq!(ballot(epoch1(2)).epoch(), 1);
}

#[test]
fn a_campaign_is_in_its_nodes_epoch_and_is_void_once_an_acceptor_has_applied_a_later_one() {
    let cfg = config(3, 0);
    let tunables = Tunables::default();
    let mut p = Proposer::new(node(1), 7, &tunables);
    assert!(p.campaign(&cfg, &tunables, Ballot::ZERO, Slot(0), 2, &mut Vec::new()));
    assert_eq!(p.ballot().epoch(), 2, "the ballot is of the node's epoch");
    let b = p.ballot();
    let elected = p.on_promise(&cfg, &tunables, node(2), b, Slot(9), Vec::new(), 3, Slot(0));
    assert_eq!(elected, Elected::Outdated { peer: node(2) });
    assert!(!p.is_candidate() && !p.is_leader(), "a void campaign stops");
    // Having seen a ballot of epoch 3, it does not campaign in epoch 2 again.
    let promised = Ballot { round: Ballot::epoch_start(3) + 1, node: node(2) };
    assert!(!p.campaign(&cfg, &tunables, promised, Slot(0), 2, &mut Vec::new()));
    assert!(!p.is_candidate());
    assert!(p.campaign(&cfg, &tunables, promised, Slot(0), 3, &mut Vec::new()), "once its walk reached it");
}

/// Rule 12 (docs/reconfiguration.md), found by seed 1685 of the five-machine test: a voter of
/// a later configuration, told a stop-sign is chosen before its walk reached it, reports it as
/// known chosen with no ballot. Taken as outranking every ballot, it turned a stop-sign the old
/// configuration had chosen below it into a `Noop`: the campaign must be void instead.
#[test]
fn a_stop_sign_of_a_later_epoch_known_chosen_above_the_prefix_voids_the_campaign() {
    let cfg = config(3, 0);
    let tunables = Tunables::default();
    let mut p = Proposer::new(node(1), 7, &tunables);
    assert!(p.campaign(&cfg, &tunables, Ballot::ZERO, Slot(4), 8, &mut Vec::new()));
    let b = p.ballot();
    let epoch8 = Ballot::epoch_start(8) + 1;
    let told = vec![reported(5, Some(epoch8), &stop_sign(9)), reported(8, None, &stop_sign(10))];
    let elected = p.on_promise(&cfg, &tunables, node(2), b, Slot(4), told, 8, Slot(4));
    assert_eq!(elected, Elected::Outdated { peer: node(2) }, "epoch 9 decided slot 8: epoch 8 is over");
    // The stop-sign that ends the campaign's own epoch, known chosen, is the merge's to honour.
    let mut p = Proposer::new(node(1), 7, &tunables);
    assert!(p.campaign(&cfg, &tunables, Ballot::ZERO, Slot(4), 8, &mut Vec::new()));
    let b = p.ballot();
    let own = vec![reported(8, None, &stop_sign(9))];
    assert_eq!(p.on_promise(&cfg, &tunables, node(2), b, Slot(4), own, 8, Slot(4)), Elected::NotYet);
}

#[test]
fn a_leader_proposes_nothing_after_its_stop_sign_until_it_is_applied() {
    let cfg = config(3, 0);
    let tunables = Tunables::default();
    let mut p = leader(&cfg);
    assert!(p.window_open(&tunables));
    let s = p.propose(Digested::new(stop_sign(1)));
    assert!(!p.window_open(&tunables), "stopped at {s:?}");
    assert_eq!(p.stop(), Some(s));
    p.stop_passed(s.next());
    assert!(!p.window_open(&tunables), "another slot does not lift it");
    p.stop_passed(s);
    assert!(p.window_open(&tunables), "a stop-sign the fold refused lifts it");
}

#[test]
fn a_reconfigure_that_does_not_end_the_campaigns_epoch_is_no_stop_sign_and_cuts_nothing() {
    let (a, b) = (write("a"), write("b"));
    // Epoch 1's campaign: a `Reconfigure` to epoch 1 (already in force) was refused by the fold,
    // and its leader went on above it at the same ballot: those values may be chosen.
    let merged = merge_promises(
        Slot(0),
        Slot(0),
        1,
        &promises(vec![(
            1,
            0,
            vec![
                reported(0, Some(Ballot::epoch_start(1) + 2), &stop_sign(1)),
                reported(1, Some(Ballot::epoch_start(1) + 2), &a),
                reported(2, Some(Ballot::epoch_start(1) + 2), &b),
            ],
        )]),
    );
    assert_eq!(merged.commands, vec![(Slot(0), stop_sign(1)), (Slot(1), a), (Slot(2), b)]);
}

/// A later epoch is seen only in a ballot a proposer used: a seat's floor (the promise a move's
/// target holds before the stop-sign naming it is decided) says nothing was decided, and a node
/// holding it must not take the slot at its prefix as chosen.
#[test]
fn a_later_epoch_is_seen_in_a_used_ballot_and_never_in_a_seat_floor() {
    let tunables = Tunables::default();
    let mut proposer = Proposer::new(node(1), 7, &tunables);
    let used = |epoch: u64, step: u64| Ballot { round: Ballot::epoch_start(epoch) + step, node: node(2) };
    assert!(!proposer.saw_later_epoch(Ballot::ZERO, 0), "nothing seen");
    assert!(!proposer.saw_later_epoch(Ballot::seat_floor(1), 0), "a seat floor of epoch 1 is no ballot of it");
    assert!(proposer.saw_later_epoch(used(1, 1), 0), "a promise of a ballot of epoch 1");
    assert!(!proposer.saw_later_epoch(used(1, 1), 1), "epoch 1 is not later than epoch 1");
    proposer.observe_leader(node(2), used(2, 4), &tunables);
    assert!(proposer.saw_later_epoch(Ballot::seat_floor(1), 1), "a leader of epoch 2 was heard");
}
