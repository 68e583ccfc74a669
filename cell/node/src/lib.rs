pub mod ports;
pub mod rpc;
