//! One decided call carried out for a [`CallPolicy`]: the world supplies the time and the
//! replies, the policy decides what is sent, to whom and after how long.

use std::time::Duration;

use paros_client::{AnswerError, CallPolicy, CallReply, Decided, ReadParams, Route, Step};
use paros_core::{NodeId, ReadRequest};

use super::{ClientIo, Reply, Request};

/// What the policy asked for next and when.
#[derive(Clone, Copy, Debug)]
enum Due {
    Call(Route),
    Read(ReadParams, Route),
}

/// A call in progress.
#[derive(Debug)]
pub struct Flight {
    policy: CallPolicy,
    started: u64,
    tick_ns: u64,
    due: Option<(u64, Due)>,
    /// The request out now, and whether it is a read (the policy's read-back).
    sent: Option<(u64, bool)>,
}

/// Where a flight stands after a callback.
pub type Settled = Option<Result<Decided, AnswerError>>;

impl Flight {
    /// Starts `policy` at `now`: its first request goes out at once.
    pub fn start(mut policy: CallPolicy, now: u64, tick_ns: u64, io: &mut ClientIo) -> (Flight, Settled) {
        let step = policy.start();
        let mut f = Flight { policy, started: now, tick_ns, due: None, sent: None };
        let done = f.take(step, now, io);
        (f, done)
    }

    /// The request in flight, if one is.
    pub fn token(&self) -> Option<u64> {
        self.sent.map(|(t, _)| t)
    }

    /// The server whose verdict ended the call, if one did.
    pub fn answered_by(&self) -> Option<NodeId> {
        self.policy.answered_by()
    }

    /// Time passed: send the request the policy scheduled, if it is due.
    pub fn wake(&mut self, now: u64, io: &mut ClientIo) {
        if self.sent.is_some() {
            return;
        }
        let Some((at, due)) = self.due else { return };
        if now < at {
            return;
        }
        self.due = None;
        let (route, request, read) = match due {
            Due::Call(route) => (route, Request::Call(Some(self.policy.id()), self.policy.call().clone()), false),
            Due::Read(p, route) => {
                let tick_ms = (self.tick_ns / 1_000_000).max(1);
                let wait_ticks = u32::try_from(u64::from(p.wait_ms).div_ceil(tick_ms)).unwrap_or(u32::MAX);
                let request = ReadRequest {
                    from: p.from,
                    limit: p.limit,
                    max_bytes: p.max_bytes,
                    wait_ticks,
                    consistency: p.consistency,
                };
                (route, Request::Read(request), true)
            }
        };
        let to = route.server.expect("a policy over named servers always names one");
        self.sent = Some((io.send(to, request), read));
    }

    /// The reply to `token` came (or the world's timeout did).
    pub fn on_reply(&mut self, token: u64, now: u64, reply: Reply, io: &mut ClientIo) -> Settled {
        let (t, read) = self.sent?;
        if t != token {
            return None;
        }
        self.sent = None;
        let elapsed = Duration::from_nanos(now.saturating_sub(self.started));
        let step = if read {
            let answer = match reply {
                Reply::Read(a) => paros_client::ReadAnswer::from_node(a),
                Reply::Call(_) | Reply::TimedOut | Reply::UnknownJournal | Reply::Refused => {
                    paros_client::ReadAnswer::Unserved { applied_to: None }
                }
            };
            self.policy.on_read(answer, elapsed)
        } else {
            let reply = match reply {
                Reply::Call(a) => CallReply::Answer(a),
                Reply::UnknownJournal => CallReply::UnknownJournal,
                Reply::Read(_) | Reply::TimedOut => CallReply::NoAnswer,
                Reply::Refused => CallReply::NotSent,
            };
            self.policy.on_reply(reply, elapsed)
        };
        self.take(step, now, io)
    }

    fn take(&mut self, step: Step, now: u64, io: &mut ClientIo) -> Settled {
        let (after, due) = match step {
            Step::Done(result) => return Some(result),
            Step::Send { route, after } => (after, Due::Call(route)),
            Step::Read { params, route, after } => (after, Due::Read(params, route)),
        };
        let after_ns = u64::try_from(after.as_nanos()).unwrap_or(u64::MAX);
        self.due = Some((now.saturating_add(after_ns), due));
        self.wake(now, io);
        None
    }
}
