//! One hosted journal: a voter or a learner-only replica behind one face.

use paros_core::{Message, NodeId, ReadId, ReadRequest, Ready, Replica, Voter};

/// One journal as hosted here.
#[derive(Debug)]
pub(super) enum Hosted {
    Voter(Box<Voter>),
    Replica(Box<Replica>),
}

impl Hosted {
    pub(super) fn config(&self) -> &paros_core::JournalConfig {
        match self {
            Hosted::Voter(v) => v.config(),
            Hosted::Replica(r) => r.config(),
        }
    }
    pub(super) fn step(&mut self, from: NodeId, m: Message) {
        match self {
            Hosted::Voter(v) => v.step(from, m),
            Hosted::Replica(r) => r.step(from, m),
        }
    }
    pub(super) fn tick(&mut self) {
        match self {
            Hosted::Voter(v) => v.tick(),
            Hosted::Replica(r) => r.tick(),
        }
    }
    pub(super) fn read(&mut self, id: ReadId, req: ReadRequest) {
        match self {
            Hosted::Voter(v) => v.read(id, req),
            Hosted::Replica(r) => r.read(id, req),
        }
    }
    pub(super) fn ready(&mut self) -> Ready {
        match self {
            Hosted::Voter(v) => v.ready(),
            Hosted::Replica(r) => r.ready(),
        }
    }
    pub(super) fn take_released(&mut self) -> paros_core::Released {
        match self {
            Hosted::Voter(v) => v.take_released(),
            Hosted::Replica(r) => r.take_released(),
        }
    }
    pub(super) fn advance(&mut self) {
        match self {
            Hosted::Voter(v) => v.advance(),
            Hosted::Replica(r) => r.advance(),
        }
    }
    pub(super) fn has_ready(&self) -> bool {
        match self {
            Hosted::Voter(v) => v.has_ready(),
            Hosted::Replica(r) => r.has_ready(),
        }
    }
    pub(super) fn is_quiet(&self) -> bool {
        match self {
            Hosted::Voter(v) => v.is_quiet(),
            Hosted::Replica(r) => r.is_quiet(),
        }
    }
}
