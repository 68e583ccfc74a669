//! A voter's check-in after a boot (`Voter::check_in`): it asks every peer, again until each has
//! answered, elects nobody when nothing is left to settle, and campaigns when it holds accepted
//! entries nobody said were chosen.

use paros_core::journal::{Command, Control, WriterMode};
use paros_core::{Ballot, Durable, JournalConfig, Life, LogEntry, Message, NodeId, Slot, Tunables, Voter};

const ME: NodeId = NodeId(1);
const PEERS: [NodeId; 2] = [NodeId(2), NodeId(3)];

fn voter(durable: Durable) -> Voter {
    let cfg = JournalConfig { mode: WriterMode::Single, voters: vec![ME, PEERS[0], PEERS[1]], learners: vec![] };
    Voter::recover(ME, cfg, Tunables::default(), 7, Life(7), durable)
}

/// Three chosen no-ops, as a journal that slept holds them; `suffix` more slots accepted at
/// ballot 1 and not known chosen.
fn durable(suffix: u64) -> Durable {
    let ballot = Ballot { round: 1, node: PEERS[0] };
    let entries = (0..3 + suffix)
        .map(|s| {
            let chosen = s < 3;
            (
                Slot(s),
                LogEntry { ballot: if chosen { None } else { Some(ballot) }, command: Command::Control(Control::Noop) },
            )
        })
        .collect();
    Durable { promise: ballot, chosen_up_to: Slot(3), entries, ..Durable::default() }
}

/// Takes one round: the messages it sends, and whether it wrote anything.
fn round(v: &mut Voter) -> (Vec<(NodeId, Message)>, bool) {
    let ready = v.ready();
    let wrote = !ready.writes.is_empty();
    let sent = ready.messages.into_iter().map(|o| (o.to, o.message)).collect();
    v.advance();
    (sent, wrote)
}

fn requests_to(sent: &[(NodeId, Message)]) -> Vec<NodeId> {
    sent.iter().filter(|(_, m)| matches!(m, Message::CatchUpRequest { from: Slot(3), .. })).map(|(to, _)| *to).collect()
}

fn answer(v: &mut Voter, from: NodeId) {
    let life = v.life();
    v.step(from, Message::CatchUpResponse { entries: Vec::new(), chosen_up_to: Slot(3), life });
}

#[test]
fn an_idle_journal_checks_in_with_every_peer_and_elects_nobody() {
    let mut v = voter(durable(0));
    let _ = round(&mut v);
    v.check_in();
    let (sent, _) = round(&mut v);
    assert_eq!(requests_to(&sent), PEERS.to_vec(), "asks every peer from its chosen prefix");
    assert!(!v.is_quiet() && v.is_checking_in());

    // One peer answers; the other's answer is lost: it is asked again, and only it.
    answer(&mut v, PEERS[0]);
    let mut asked_again = Vec::new();
    for _ in 0..64 {
        v.tick();
        let (sent, _) = round(&mut v);
        asked_again.extend(requests_to(&sent));
        assert!(
            !sent.iter().any(|(_, m)| matches!(m, Message::Prepare { .. })),
            "no election while checking in: {sent:?}"
        );
        if !asked_again.is_empty() {
            break;
        }
    }
    assert_eq!(asked_again, vec![PEERS[1]], "the peer that did not answer is asked again");
    assert!(v.is_checking_in());

    answer(&mut v, PEERS[1]);
    v.tick();
    let (sent, wrote) = round(&mut v);
    assert!(!v.is_checking_in() && v.is_quiet(), "every peer answered: done, and quiet");
    assert!(sent.is_empty() && !wrote, "and it sends and writes nothing more: {sent:?}");
    for _ in 0..200 {
        v.tick();
        let (sent, wrote) = round(&mut v);
        assert!(sent.is_empty() && !wrote, "a checked-in idle journal stays silent: {sent:?}");
    }
    assert_eq!(v.promised(), Ballot { round: 1, node: PEERS[0] }, "no promise was made");
}

#[test]
fn a_journal_holding_entries_nobody_knows_chosen_campaigns_after_its_check_in() {
    let mut v = voter(durable(2));
    let _ = round(&mut v);
    v.check_in();
    let _ = round(&mut v);
    for p in PEERS {
        answer(&mut v, p);
    }
    v.tick();
    let (sent, _) = round(&mut v);
    let prepares: Vec<NodeId> =
        sent.iter().filter(|(_, m)| matches!(m, Message::Prepare { .. })).map(|(to, _)| *to).collect();
    assert_eq!(prepares, PEERS.to_vec(), "it campaigns so that a leader settles slots 3 and 4: {sent:?}");
}

#[test]
fn a_peer_asked_from_past_its_prefix_learns_it_is_behind_and_catches_up() {
    let mut v = voter(durable(0));
    v.sleep();
    let _ = round(&mut v);
    assert!(v.is_quiet(), "asleep as a journal woken by a message is");
    // A peer checking in says its chosen prefix ends at slot 9.
    v.step(PEERS[1], Message::CatchUpRequest { from: Slot(9), life: Life(99) });
    let (sent, _) = round(&mut v);
    assert!(
        sent.iter().any(|(to, m)| *to == PEERS[1]
            && matches!(
                m,
                Message::CatchUpResponse { entries, chosen_up_to: Slot(3), life: Life(99) } if entries.is_empty()
            )),
        "it answers with its own prefix: {sent:?}"
    );
    assert!(!v.is_quiet(), "and knows it is behind");
    let mut asked = false;
    for _ in 0..64 {
        v.tick();
        let (sent, _) = round(&mut v);
        asked |= sent.iter().any(|(_, m)| matches!(m, Message::CatchUpRequest { from: Slot(3), .. }));
    }
    assert!(asked, "it asks for slots 3..9");
}
