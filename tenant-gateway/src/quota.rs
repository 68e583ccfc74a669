//! Per-tenant rate quotas: token buckets for requests/s and record bytes/s, each refilled at
//! the tenant's rate (from the directory's `Quotas`) and holding at most one second's worth.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use paros_core::TenantId;
use paros_registry::Quotas;

#[derive(Clone, Copy, Debug)]
struct Bucket {
    level: f64,
    at: Instant,
}

impl Bucket {
    /// Takes `n` from a bucket refilled at `rate` per second (capacity: one second's worth, and
    /// at least `n` so one large request can pass an idle bucket); or the wait until it could.
    fn take(&mut self, now: Instant, rate: f64, n: f64) -> Result<(), Duration> {
        let capacity = rate.max(n);
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.level = (self.level + elapsed * rate).min(capacity);
        self.at = now;
        if self.level >= n {
            self.level -= n;
            return Ok(());
        }
        if rate <= 0.0 {
            return Err(Duration::from_secs(1));
        }
        Err(Duration::from_secs_f64(((n - self.level) / rate).clamp(0.001, 3600.0)))
    }
}

/// One tenant's buckets: requests, then bytes (each made at its first use).
type Buckets = (Option<Bucket>, Option<Bucket>);

/// Every tenant's buckets.
#[derive(Debug, Default)]
pub struct QuotaBook {
    buckets: Mutex<HashMap<TenantId, Buckets>>,
}

impl QuotaBook {
    /// Admits one request of `tenant`, or says how long until one would be admitted.
    ///
    /// # Errors
    /// The wait, when the tenant is over its requests/s.
    pub fn admit_request(&self, tenant: TenantId, quotas: &Quotas, now: Instant) -> Result<(), Duration> {
        let rate = f64::from(quotas.requests_per_s);
        let mut book = self.buckets.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let slot = &mut book.entry(tenant).or_default().0;
        slot.get_or_insert(Bucket { level: rate, at: now }).take(now, rate, 1.0)
    }

    /// Admits `bytes` record bytes of `tenant`.
    ///
    /// # Errors
    /// The wait, when the tenant is over its bytes/s.
    pub fn admit_bytes(&self, tenant: TenantId, quotas: &Quotas, bytes: u64, now: Instant) -> Result<(), Duration> {
        #[allow(clippy::cast_precision_loss)]
        let (rate, n) = (quotas.bytes_per_s as f64, bytes as f64);
        let mut book = self.buckets.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let slot = &mut book.entry(tenant).or_default().1;
        slot.get_or_insert(Bucket { level: rate, at: now }).take(now, rate, n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_admits_its_rate_then_names_the_wait() {
        let book = QuotaBook::default();
        let q = Quotas { requests_per_s: 2, bytes_per_s: 10, journals_max: 1 };
        let t0 = Instant::now();
        assert!(book.admit_request(TenantId(1), &q, t0).is_ok());
        assert!(book.admit_request(TenantId(1), &q, t0).is_ok());
        let wait = book.admit_request(TenantId(1), &q, t0).expect_err("the third request in the same instant is over");
        assert!(wait <= Duration::from_millis(500) && wait > Duration::ZERO);
        assert!(book.admit_request(TenantId(2), &q, t0).is_ok(), "tenants have their own buckets");
        assert!(book.admit_request(TenantId(1), &q, t0 + Duration::from_millis(600)).is_ok(), "refilled");
        assert!(book.admit_bytes(TenantId(1), &q, 10, t0).is_ok());
        assert!(book.admit_bytes(TenantId(1), &q, 1, t0).is_err());
    }
}
