//! The workload's application state: a hash chain over every application record of the journal,
//! and how many there were. Readers fold it, checkpointing writers checkpoint it, and the audit
//! compares every client's chain at every position ("every client folds the same record to the
//! same state").

use paros_client::{Checkpointable, Seq};

use super::{chain_origin, chain_step};

/// The folded state: a chain over every application record below the fold's position.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Chain {
    pub chain: u64,
    pub applied: u64,
}

impl Default for Chain {
    fn default() -> Self {
        Chain { chain: chain_origin(), applied: 0 }
    }
}

impl Checkpointable for Chain {
    type RestoreError = String;

    fn apply(&mut self, position: Seq, record: &[u8]) {
        self.chain = chain_step(self.chain, position.0, record);
        self.applied += 1;
    }

    fn checkpoint(&self) -> Vec<u8> {
        let mut out = self.chain.to_le_bytes().to_vec();
        out.extend_from_slice(&self.applied.to_le_bytes());
        out
    }

    fn restore(bytes: &[u8]) -> Result<Self, String> {
        let (Some(chain), Some(applied)) = (bytes.get(..8), bytes.get(8..16)) else {
            return Err(format!("a chain state is 16 bytes, not {}", bytes.len()));
        };
        if bytes.len() != 16 {
            return Err(format!("a chain state is 16 bytes, not {}", bytes.len()));
        }
        let word = |b: &[u8]| u64::from_le_bytes(b.try_into().expect("8 bytes"));
        Ok(Chain { chain: word(chain), applied: word(applied) })
    }
}
