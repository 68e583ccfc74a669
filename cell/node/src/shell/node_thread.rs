//! The node thread's loop: waits for the bus inbox, control requests, the round being
//! persisted and the store reads' answers, as [`Schedule`] says; steps the [`Pump`]; hands each
//! round's batch to the storage thread and each store read (pages, catch-ups, wakes of dormant
//! journals) to the read threads; sends what each step releases. It never reads the store.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::poll::{micros, spin_for};
use super::read_pool::ReadPool;
use super::store_worker::{Done, Persisting, StoreWorker};
use super::{Control, NodeFault, ShellConfig};
use crate::fetch::Fetched;
use crate::host::{Host, HostStats, Owed};
use crate::ports::{Clock, LogStore, Transport};
use crate::pump::{Persist, Pump};
use crate::read_cache::ReadCache;
use crate::rpc::{Incoming, NodeRequest, Responder};
use crate::schedule::{Next, Schedule, Spin, Wake};
use crate::timing::RoundTimes;

/// What a node's thread listens to.
pub(super) struct Inputs {
    pub(super) inbox: tokio::sync::mpsc::Receiver<Incoming>,
    pub(super) controls: tokio::sync::mpsc::Receiver<Control>,
    pub(super) stopped: tokio::sync::oneshot::Receiver<()>,
}

/// Carries out `control`. A journal removed is forgotten by `cache` at once: its readers are
/// served nothing of it from then on.
fn apply_control<S: LogStore>(
    pump: &mut Pump<S>,
    responders: &mut BTreeMap<Owed, Responder>,
    control: Control,
    cache: Option<&ReadCache>,
) {
    match control {
        Control::Place { journals, reply } => {
            let host = pump.host_mut();
            let me = host.id();
            let results = journals
                .into_iter()
                .map(|assignment| {
                    // With dormancy a new journal is placed asleep: its first call elects.
                    if host.dormancy().is_some() {
                        return host.assign(assignment, true);
                    }
                    let key = assignment.key;
                    let first = assignment.config.voters.first() == Some(&me);
                    let placed = host.assign(assignment, false);
                    // The first leader is chosen by placement: the first voter campaigns at
                    // once, the others wait for its heartbeat (no election storm when
                    // thousands of journals are placed together).
                    if placed.is_ok() && first {
                        host.campaign(&key);
                    }
                    placed
                })
                .collect();
            let _ = reply.send(results);
        }
        Control::Remove { key, epoch, reply } => {
            let removed = pump.host_mut().remove_at(&key, epoch);
            if let Some(cache) = cache {
                cache.publish(pump.host_mut().take_publications());
            }
            for (owed, answer) in removed.iter().flatten() {
                if let Some(r) = responders.remove(owed) {
                    let _ = r.send(answer.clone());
                }
            }
            let _ = reply.send(removed.is_some());
        }
        Control::Campaign { key } => pump.host_mut().campaign(&key),
    }
}

/// The node thread's loop, until it is stopped or its inbox closes; returns the host. A storage
/// fault ends it at once, before anything else is answered or sent, and is returned instead.
pub(super) async fn run<S: LogStore, T: Transport, C: Clock>(
    host: Host<S>,
    mut transport: T,
    inputs: Inputs,
    clock: &C,
    config: ShellConfig,
    (stats, times): (&Mutex<HostStats>, &Mutex<RoundTimes>),
    cache: Option<&ReadCache>,
) -> Result<Host<S>, NodeFault> {
    let Inputs { mut inbox, mut controls, mut stopped } = inputs;
    let me = host.id();
    let mut responders: BTreeMap<Owed, Responder> = BTreeMap::new();
    let reads_max = config.reads_queued_max.max(1);
    // One message per batch a read thread answers, each of at least one job: room for as many
    // as jobs may be out.
    let (answered, mut answers) = tokio::sync::mpsc::channel::<Vec<Fetched>>(reads_max);
    let readers = (0..config.read_workers.max(1)).map(|_| host.store().reader()).collect();
    let reads = ReadPool::spawn(me, readers, (reads_max, config.read_batch_max), &answered);
    drop(answered);
    let mut pump = Pump::new(host, clock.now_ms());
    let spin = Spin::new(micros(config.idle_spin), config.spin_round_journals_max);
    let mut schedule = Schedule::new(spin, config.inputs_per_round_max);
    let storage = StoreWorker::<S>::spawn(me, spin);
    // The round whose batch the storage thread is persisting, if any: inputs keep flowing and
    // answers keep leaving while the disk syncs.
    let mut persisting: Option<Persisting<S>> = None;
    // When the oldest input not yet in a round's batch arrived, and when the last sync ended.
    let mut first_input: Option<Instant> = None;
    let mut synced_at: Option<Instant> = None;
    let mut fault = None;
    loop {
        let mut input = None;
        let mut done = None;
        let inputs_max = match schedule.next(pump.wants_step(), persisting.is_some()) {
            Next::Step { inputs_max } => {
                input = inbox.try_recv().ok();
                inputs_max
            }
            Next::Wait { spin_us, inputs_max } => {
                // Look without sleeping first (bounded by the spin): the next input or the
                // round's end usually comes within it.
                let waited = Instant::now();
                let polled =
                    spin_for(Duration::from_micros(spin_us), || poll_once(&mut inbox, &mut persisting, &mut answers));
                let mut woke = Wake::Idle;
                match polled {
                    Some(Woke::Input(m)) => input = Some(m),
                    Some(Woke::Persisted(d)) => done = Some(d),
                    Some(Woke::Fetched(batch)) => {
                        batch.into_iter().for_each(|f| pump.fetched(f));
                        woke = Wake::Work;
                    }
                    None => tokio::select! {
                        m = inbox.recv() => match m {
                            Some(m) => input = Some(m),
                            None if persisting.is_none() => break,
                            None => {}
                        },
                        d = async { persisting.as_mut().expect("guarded").await }, if persisting.is_some() => {
                            persisting = None;
                            done = Some(d.expect("the storage thread does not panic"));
                        }
                        Some(batch) = answers.recv() => {
                            batch.into_iter().for_each(|f| pump.fetched(f));
                            woke = Wake::Work;
                        }
                        Some(c) = controls.recv() => apply_control(&mut pump, &mut responders, c, cache),
                        () = tokio::time::sleep(Duration::from_millis(
                            pump.next_due_ms().saturating_sub(clock.now_ms()),
                        )) => {}
                        _ = &mut stopped, if persisting.is_none() => break,
                    },
                }
                // A timer's wake is not an input coming soon, nor is a ping or a heartbeat; a
                // persisted round is (its answers release more work).
                if input.as_ref().is_some_and(is_work) || done.is_some() {
                    woke = Wake::Work;
                }
                schedule.woke(micros(waited.elapsed()), woke);
                inputs_max
            }
        };
        let synced = match done {
            None => None,
            Some((store, batch, Ok(spent))) => {
                {
                    let mut t = times.lock().expect("times lock");
                    t.write.record(micros(spent.write));
                    if let Some(sync) = spent.sync {
                        t.sync.record(micros(sync));
                    }
                }
                synced_at = Some(spent.ended);
                pump.host_mut().return_store(store);
                Some(batch)
            }
            // The round's writes are unknown: stop before anything more is answered or sent.
            // The callers still waiting get no answer (their replies drop with this loop).
            Some((_, _, Err(error))) => {
                fault = Some(NodeFault { node: me, error });
                break;
            }
        };
        for _ in 0..config.control_queue_max {
            let Ok(c) = controls.try_recv() else { break };
            apply_control(&mut pump, &mut responders, c, cache);
        }
        while let Ok(batch) = answers.try_recv() {
            batch.into_iter().for_each(|f| pump.fetched(f));
        }
        let mut absorbed = 0;
        if input.is_some() && first_input.is_none() {
            first_input = Some(Instant::now());
        }
        while let Some(i) = input {
            match i {
                Incoming::Protocol { from, envelopes } => pump.deliver(from, envelopes),
                Incoming::Published { from, envelopes } => pump.deliver(from, envelopes.to_vec()),
                Incoming::Request { request, reply } => take_request(&mut pump, &mut responders, request, reply),
                Incoming::Requests(requests) => {
                    for (request, reply) in requests {
                        take_request(&mut pump, &mut responders, request, reply);
                    }
                }
            }
            absorbed += 1;
            if absorbed >= inputs_max {
                break;
            }
            input = inbox.try_recv().ok();
        }
        let mut effects = pump.step(clock.now_ms(), synced);
        if let Some(cache) = cache {
            cache.publish(std::mem::take(&mut effects.published));
        }
        if let Some(Persist { placements, batch, needs_sync }) = effects.persist {
            if let Some(at) = first_input.take() {
                times.lock().expect("times lock").queue.record(micros(at.elapsed()));
            }
            schedule.persist(batch.len());
            persisting = Some(storage.persist(pump.host_mut().lend_store(), placements, batch, needs_sync));
        }
        // The step's store reads go out together: one wake of a read thread for them all.
        for refused in reads.submit(effects.fetches) {
            pump.fetched(refused);
        }
        for peer in effects.pings {
            transport.send(peer, Vec::new());
        }
        for (to, envelopes) in effects.messages {
            transport.send(to, envelopes);
        }
        for (owed, answer) in effects.answers {
            if let Some(r) = responders.remove(&owed) {
                let _ = r.send(answer);
            }
        }
        if let Some(at) = synced_at.take() {
            times.lock().expect("times lock").hop.record(micros(at.elapsed()));
        }
        *stats.lock().expect("stats lock") = pump.host().stats();
    }
    storage.stop();
    if let Some(cache) = cache {
        cache.close();
    }
    if let Some(fault) = fault {
        // Nothing more is released: each read thread ends after the read it is doing.
        drop(answers);
        reads.stop();
        return Err(fault);
    }
    reads.stop();
    // Every read handed out comes back, so the host's count of reads out is right if it runs
    // again (its callers are gone with this loop).
    while let Ok(batch) = answers.try_recv() {
        batch.into_iter().for_each(|f| pump.fetched(f));
    }
    Ok(pump.into_host())
}

/// What woke a waiting node thread without a sleep.
enum Woke<S> {
    Input(Incoming),
    Persisted(Done<S>),
    Fetched(Vec<Fetched>),
}

/// One look at what a waiting node thread waits for.
fn poll_once<S>(
    inbox: &mut tokio::sync::mpsc::Receiver<Incoming>,
    persisting: &mut Option<Persisting<S>>,
    answers: &mut tokio::sync::mpsc::Receiver<Vec<Fetched>>,
) -> Option<Woke<S>> {
    if let Some(p) = persisting.as_mut() {
        match p.try_recv() {
            Ok(done) => {
                *persisting = None;
                return Some(Woke::Persisted(done));
            }
            Err(tokio::sync::oneshot::error::TryRecvError::Empty) => {}
            Err(tokio::sync::oneshot::error::TryRecvError::Closed) => panic!("the storage thread does not panic"),
        }
    }
    if let Ok(f) = answers.try_recv() {
        return Some(Woke::Fetched(f));
    }
    inbox.try_recv().ok().map(Woke::Input)
}

/// Hands one request to the host: answered now, or owed (its responder kept until the answer).
fn take_request<S: LogStore>(
    pump: &mut Pump<S>,
    responders: &mut BTreeMap<Owed, Responder>,
    request: NodeRequest,
    reply: Responder,
) {
    match pump.request(request) {
        // A resend of a call still owed takes its answer here; the earlier send's caller, who
        // gave up on it, is told `Dropped`.
        Ok(owed) => {
            responders.insert(owed, reply);
        }
        Err(answer) => {
            let _ = reply.send(answer);
        }
    }
}

/// Whether an input is work that more input usually follows soon (a request, or a protocol
/// message other than liveness), rather than a ping or a heartbeat.
fn is_work(input: &Incoming) -> bool {
    match input {
        Incoming::Request { .. } | Incoming::Requests(_) => true,
        Incoming::Protocol { envelopes, .. } => envelopes.iter().any(|e| !e.message.is_liveness()),
        Incoming::Published { envelopes, .. } => envelopes.iter().any(|e| !e.message.is_liveness()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_inputs_that_carry_work_keep_a_node_polling() {
        use crate::ports::Envelope;
        use paros_core::{Ballot, JournalKey, Message, NodeId, Slot};
        let from = NodeId(2);
        let envelope = |message| Envelope { journal: JournalKey::default(), from, message };
        let protocol = |envelopes| Incoming::Protocol { from, envelopes };
        let ballot = Ballot { round: 1, node: from };
        let heartbeat = envelope(Message::Heartbeat { ballot, commit: Slot(3), quiesce: false });
        let ack = envelope(Message::HeartbeatAck { ballot, chosen_up_to: Slot(3) });
        let accept = envelope(Message::Accept { ballot, entries: Vec::new(), commit: Slot(3) });
        assert!(!is_work(&protocol(Vec::new())), "a ping");
        assert!(!is_work(&protocol(vec![heartbeat.clone(), ack])), "liveness only");
        assert!(is_work(&protocol(vec![heartbeat, accept])), "an accept among heartbeats");
        let (reply, _answer) = tokio::sync::oneshot::channel();
        let read = crate::rpc::NodeRequest::Read {
            journal: JournalKey::default(),
            id: paros_core::ReadId(1),
            read: paros_core::wire::ReadRequest {
                from: paros_core::Seq(0),
                limit: 1,
                max_bytes: 0,
                wait_ticks: 0,
                consistency: paros_core::wire::Consistency::Linearizable,
            },
        };
        assert!(is_work(&Incoming::Request { request: read, reply }), "a request");
    }
}
