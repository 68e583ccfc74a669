//! Draws from the operating system's random generator: the seeds of the ordinary constructors
//! and the fences of writers that were given no seed. Nothing else in the crate draws from it,
//! so a simulation that seeds every constructor stays deterministic.

/// Fills a buffer from the OS's generator.
///
/// # Panics
/// When the OS has no generator: no fence could be drawn that is safe from another writer's.
fn os_bytes<const N: usize>() -> [u8; N] {
    let mut buf = [0u8; N];
    getrandom::fill(&mut buf).expect("the OS random generator is available");
    buf
}

/// A u64 from the OS's generator.
pub(crate) fn os_u64() -> u64 {
    u64::from_le_bytes(os_bytes())
}

/// A u128 from the OS's generator.
pub(crate) fn os_u128() -> u128 {
    u128::from_le_bytes(os_bytes())
}
