//! A replica machine's state: its readiness.

use paros_node::host::ReplicaStates;

/// Where a replica machine stands (DESIGN §7). It is ready only when `Serving`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum State {
    /// Some journal has not yet heard a quorum's watermark since the machine started.
    Bootstrapping,
    /// Every journal heard one; some have not applied through it yet.
    CatchingUp,
    /// Every journal caught up once since the machine started.
    Serving,
}

impl State {
    /// The machine's state from its journals' ([`paros_node::HostStats::replicas`]).
    #[must_use]
    pub fn of(journals: &ReplicaStates) -> State {
        if journals.bootstrapping > 0 {
            State::Bootstrapping
        } else if journals.catching_up > 0 {
            State::CatchingUp
        } else {
            State::Serving
        }
    }

    /// Whether reads may be sent here (its readiness probe passes).
    #[must_use]
    pub fn is_ready(self) -> bool {
        self == State::Serving
    }

    /// The state's name as metrics, the UI and the API spell it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            State::Bootstrapping => "bootstrapping",
            State::CatchingUp => "catching_up",
            State::Serving => "serving",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_journal_not_caught_up_keeps_the_machine_unready() {
        let all = |b, c, s| ReplicaStates { bootstrapping: b, catching_up: c, serving: s, ..ReplicaStates::default() };
        assert_eq!(State::of(&all(1, 5, 100)), State::Bootstrapping);
        assert_eq!(State::of(&all(0, 1, 100)), State::CatchingUp);
        assert_eq!(State::of(&all(0, 0, 100)), State::Serving);
        assert_eq!(State::of(&all(0, 0, 0)), State::Serving, "a replica with no journal yet has nothing to catch up");
        assert!(!State::CatchingUp.is_ready() && State::Serving.is_ready());
    }
}
