//! The workload clients: waking them, carrying their calls to machines and answers back, and
//! recording every call in the history.

use paros_core::journal::{Outcome, WriterMode};
use paros_core::{Call, CallAnswer, CallId, JournalKey, NodeId};

use super::{ClientKind, Event, Outstanding, World};
use crate::check::{HistoryHeader, HistoryOp, JournalHeader, OpInput, OpOutput};
use crate::client::{ClientCtx, ClientEvent, ClientIo, Outgoing, Reply, Request};
use crate::host::Host;

impl<H: Host> World<H> {
    pub(super) fn clamp(&self, journal: usize) -> Option<u64> {
        self.clients
            .iter()
            .filter(|c| c.journal == journal)
            .filter_map(|c| match &c.kind {
                ClientKind::Reader(r) if r.folding() => Some(r.cursor()),
                ClientKind::Writer(w) => w.folding_at(),
                _ => None,
            })
            .min()
    }

    fn ctx(&self, c: usize) -> ClientCtx {
        ClientCtx { clamp: self.clamp(self.clients[c].journal), stopping: self.stopping }
    }

    pub(super) fn wake_client(&mut self, c: usize) {
        let ctx = self.ctx(c);
        let mut io = ClientIo::new(self.clients[c].next_token);
        let now = self.now;
        if matches!(self.clients[c].kind, ClientKind::Reader(_)) {
            self.tell_router();
        }
        let config = &self.routes[self.clients[c].journal];
        match &mut self.clients[c].kind {
            ClientKind::Writer(w) => w.wake(now, ctx, &mut io),
            ClientKind::Reader(r) => {
                let (tier, claims) = (&mut self.tier, &mut self.audit.claims);
                r.wake(now, ctx, &mut || tier.read_servers(claims, now, config), &mut io);
            }
            ClientKind::Prober(p) => p.wake(now, ctx, &mut io),
        }
        self.flush_client(c, io);
    }

    /// A truncation to `up_to` on `journal` was just sent or answered: its probers may race it.
    fn notify_trim(&mut self, journal: usize, up_to: u64) {
        for c in 0..self.clients.len() {
            if self.clients[c].journal != journal || !matches!(self.clients[c].kind, ClientKind::Prober(_)) {
                continue;
            }
            let ctx = self.ctx(c);
            let mut io = ClientIo::new(self.clients[c].next_token);
            if let ClientKind::Prober(p) = &mut self.clients[c].kind {
                p.on_trim(up_to, ctx, &mut io);
            }
            self.flush_client(c, io);
        }
    }

    pub(super) fn flush_client(&mut self, c: usize, io: ClientIo) {
        self.clients[c].next_token = io.next_token();
        let key = self.journals[self.clients[c].journal].0;
        let multi = self.journals[self.clients[c].journal].1.mode == WriterMode::Multi;
        if io.events.iter().any(|ev| matches!(ev, ClientEvent::Acked { .. })) {
            self.moves_acked(key);
        }
        for ev in &io.events {
            let name = &self.clients[c].name;
            match ev {
                ClientEvent::Gap { from, resumed_at } => {
                    self.trace.event(self.now, "gap", &[*from, *resumed_at], || {
                        format!("{name} skipped seq{from}..seq{resumed_at}: truncated past its cursor")
                    });
                }
                ClientEvent::Restored { begin } => {
                    self.trace.event(self.now, "restored", &[*begin], || {
                        format!("{name} restored from the run at seq{begin}")
                    });
                }
                _ => {}
            }
            // A multi-writer journal's records name no position: its acknowledgements and
            // deliveries are judged by the multi-writer checks, the rest as for any journal.
            match ev {
                ClientEvent::Acked { seq, records } if multi => {
                    self.multi.on_acked(key, name, *seq, records, &mut self.audit.claims);
                    for (i, r) in records.iter().enumerate() {
                        self.audit.acked.entry((key, seq + i as u64)).or_insert_with(|| r.clone());
                    }
                }
                ClientEvent::Delivered { seq, record } if multi => {
                    self.multi.on_delivered(key, name, *seq, record, &mut self.audit.claims)
                }
                _ => self.audit.on_client(key, name, ev),
            }
        }
        let journal = self.clients[c].journal;
        for out in io.sends {
            let trim = match &out.request {
                Request::Call(_, Call::Truncate { up_to, .. }) => Some(up_to.0),
                _ => None,
            };
            self.send_request(c, out);
            if let Some(up_to) = trim {
                self.notify_trim(journal, up_to);
            }
        }
    }

    pub(super) fn send_request(&mut self, c: usize, out: Outgoing) {
        let Outgoing { token, to, request, probe } = out;
        let Some(&m) = self.index.get(&to) else { return };
        let (journal, mode) = (self.journals[self.clients[c].journal].0, self.journals[self.clients[c].journal].1.mode);
        if let (WriterMode::Multi, Request::Call(_, Call::Write { leader: None, records, .. })) = (mode, &request) {
            self.multi.on_sent(journal, records);
        }
        let req = self.next_request;
        self.next_request += 1;
        self.history_index += 1;
        self.history.push(HistoryOp {
            journal,
            client: self.clients[c].name.clone(),
            input: op_input(&request),
            output: None,
            call_ns: self.now,
            return_ns: None,
            call_index: self.history_index,
            return_index: None,
            to,
            server: None,
            probe,
            report: None,
        });
        self.requests.insert(req, Outstanding { client: c, token, history: self.history.len() - 1 });
        let name = &self.clients[c].name;
        self.trace.event(self.now, "request", &[req, to.0], || format!("{name} -> {to:?} #{req} {request:?}"));
        if matches!(request, Request::Call(..)) {
            self.progress.on_call(self.clients[c].journal, req, self.now);
        }
        // A machine gone for good refuses the connection: the request fails at once, never
        // having reached a server (its client tries elsewhere), as against a process that
        // exited, not after a timeout.
        if self.machines[m].refused {
            let d = self.delay();
            self.after(d, Event::Reply { req, from: to, reply: Reply::Refused });
            return;
        }
        let timeout = self.params.call_timeout_ns;
        self.after(timeout, Event::Timeout(req));
        if !self.rng.chance(self.net().drop_ppm) {
            let d = self.delay();
            self.after(d, Event::Request { to: m, req, journal, request });
        }
    }

    pub(super) fn on_request(&mut self, to: usize, req: u64, journal: JournalKey, request: Request) {
        let id = self.machines[to].spec.id;
        let Some(host) = self.machines[to].host.as_mut() else { return };
        match request {
            Request::Call(id, call) => host.call(journal, req, id.unwrap_or(CallId(req)), call),
            Request::Read(read) => {
                if let Some((answer, applied)) = host.read_locally(&journal, &read) {
                    // Served from the machine's read cache on arrival, as a reader in its
                    // process is: no step, no read worker.
                    if self.machines[to].spec.role == crate::host::MachineRole::Replica
                        && matches!(answer, paros_core::ReadAnswer::Page { .. })
                    {
                        self.audit.on_replica_page(id, journal, applied);
                    }
                    self.audit.claims.reach(crate::check::claims::Claim::ReadCached);
                    self.send_reply(req, id, Reply::Read(answer));
                    return;
                }
                host.read(journal, req, read);
                self.audit.read_delivered(id, journal, req);
            }
        }
        self.kick(to);
    }

    pub(super) fn send_reply(&mut self, req: u64, from: NodeId, reply: Reply) {
        if !self.requests.contains_key(&req) || self.rng.chance(self.net().drop_ppm) {
            return;
        }
        let d = self.delay();
        self.after(d, Event::Reply { req, from, reply });
    }

    pub(super) fn resolve(&mut self, req: u64, from: Option<NodeId>, reply: Reply) {
        let Some(o) = self.requests.remove(&req) else { return };
        let journal = self.clients[o.client].journal;
        let decided = matches!(reply, Reply::Call(paros_core::CallAnswer::Verdict(_)));
        // A machine gone for good (its wiped store refused to boot) answers nothing, as a
        // refused connection: the client's call ended without a verdict, and it tries elsewhere.
        let to = self.history[o.history].to;
        let gone = self.index.get(&to).is_some_and(|m| self.machines[*m].refused);
        let answered = gone || !matches!(reply, Reply::TimedOut);
        self.progress.on_end(journal, req, self.now, answered, decided, &mut self.audit.claims);
        let h = &mut self.history[o.history];
        match &reply {
            Reply::Call(a) => h.output = Some(OpOutput::Call(*a)),
            Reply::Read(a) => h.output = Some(OpOutput::Read(a.clone())),
            // Nothing was done: judged as a call whose outcome is unknown (it has no return).
            Reply::TimedOut | Reply::UnknownJournal | Reply::Refused => {}
        }
        if !matches!(reply, Reply::TimedOut | Reply::UnknownJournal | Reply::Refused) {
            self.history_index += 1;
            h.return_ns = Some(self.now);
            h.return_index = Some(self.history_index);
            h.server = from;
        }
        let trimmed = match (&h.input, &reply) {
            (OpInput::Truncate { .. }, Reply::Call(CallAnswer::Verdict(Outcome::Trimmed(view)))) => {
                Some(view.first_seq.0)
            }
            _ => None,
        };
        if let OpInput::Read { .. } = h.input {
            let (key, to, sent) = (h.journal, h.to, h.call_ns);
            let answer = match &reply {
                Reply::Read(a) => Some(a),
                Reply::Call(_) | Reply::TimedOut | Reply::UnknownJournal | Reply::Refused => None,
            };
            self.tier_on_read(o.client, key, (to, sent), from, answer);
        }
        let h = &self.history[o.history];
        if let (OpInput::Read { from: f, .. }, Reply::Read(answer)) = (&h.input, &reply) {
            let key = h.journal;
            let f = *f;
            self.audit.on_read(key, f, answer);
            if let OpInput::Read { consistency: paros_core::Consistency::Reached(seq), .. } = h.input {
                let by_replica = from.is_some_and(|f| self.is_replica(f));
                self.audit.on_at_least(key, seq, answer, by_replica);
            }
        }
        let name = &self.clients[o.client].name;
        self.trace.event(self.now, "reply", &[req, reply_code(&reply)], || format!("{name} <- #{req} {reply:?}"));
        let c = o.client;
        let mut io = ClientIo::new(self.clients[c].next_token);
        let now = self.now;
        match &mut self.clients[c].kind {
            ClientKind::Writer(w) => w.on_reply(now, o.token, from, reply, &mut io),
            ClientKind::Reader(r) => r.on_reply(now, o.token, reply, &mut io),
            ClientKind::Prober(p) => p.on_reply(o.token, &reply),
        }
        for ev in &io.events {
            if let ClientEvent::Reported(report) = ev {
                self.history[o.history].report = Some(*report);
            }
        }
        self.flush_client(c, io);
        if let Some(first) = trimmed {
            let journal = self.clients[c].journal;
            self.notify_trim(journal, first);
        }
        self.wake_client(c);
    }

    /// The history file's header: the journals, their modes and the limits every server used.
    pub(super) fn history_header(&self) -> HistoryHeader {
        let t = &self.params.tunables;
        HistoryHeader {
            seed: self.seed,
            tick_ns: self.params.tick_ns,
            call_timeout_ns: self.params.call_timeout_ns,
            page_records_max: t.page_records_max,
            page_bytes_max: t.page_bytes_max,
            write_records_max: t.limits.write_records_max,
            write_bytes_max: t.limits.write_bytes_max,
            wait_ticks_max: t.wait_ticks_max,
            read_ticks_max: t.read_ticks_max,
            journals: self
                .journals
                .iter()
                .map(|(key, config)| JournalHeader {
                    key: *key,
                    mode: config.mode,
                    voters: config.voters.clone(),
                    learners: config.learners.clone(),
                })
                .collect(),
        }
    }
}

fn op_input(request: &Request) -> OpInput {
    match request {
        Request::Call(_, Call::Write { leader, seq, records }) => {
            OpInput::Write { leader: *leader, seq: seq.0, records: records.clone() }
        }
        Request::Call(_, Call::Truncate { leader, up_to }) => OpInput::Truncate { leader: *leader, up_to: up_to.0 },
        Request::Call(_, Call::SetLeader { new, old }) => OpInput::SetLeader { new: *new, old: *old },
        Request::Call(_, Call::Reconfigure { .. }) => {
            unreachable!("the simulation's tenants call Write, Truncate and SetLeader only")
        }
        Request::Read(r) => OpInput::Read {
            from: r.from.0,
            limit: r.limit,
            max_bytes: r.max_bytes,
            wait_ticks: r.wait_ticks,
            consistency: r.consistency,
        },
    }
}

fn reply_code(reply: &Reply) -> u64 {
    match reply {
        Reply::Call(_) => 1,
        Reply::Read(_) => 2,
        Reply::TimedOut => 3,
        Reply::UnknownJournal => 4,
        Reply::Refused => 5,
    }
}

impl<H: Host> World<H> {
    /// Whether machine `id` is a learner-only replica.
    fn is_replica(&self, id: NodeId) -> bool {
        self.index.get(&id).is_some_and(|m| self.machines[*m].spec.role == crate::host::MachineRole::Replica)
    }
}
