//! Per-tenant rate quotas: token buckets for requests/s and record bytes/s, each refilled at
//! the tenant's rate (from the directory's `Quotas`) and holding at most one second's worth.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
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

impl Bucket {
    fn refill(&mut self, now: Instant, rate: f64) {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.level = (self.level + elapsed * rate).min(rate);
        self.at = now;
    }

    /// Ok while the bucket holds anything; else the wait until it does.
    fn owing(&mut self, now: Instant, rate: f64) -> Result<(), Duration> {
        self.refill(now, rate);
        if self.level > 0.0 {
            return Ok(());
        }
        if rate <= 0.0 {
            return Err(Duration::from_secs(1));
        }
        Err(Duration::from_secs_f64((-self.level / rate).clamp(0.001, 3600.0)))
    }

    fn charge(&mut self, now: Instant, rate: f64, n: f64) {
        self.refill(now, rate);
        self.level -= n;
    }
}

/// One tenant's buckets: requests, then bytes (each made at its first use).
type Buckets = (Option<Bucket>, Option<Bucket>);

/// Which of a tenant's rates a request is over, and the wait until it would pass.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Over {
    Requests(Duration),
    Bytes(Duration),
}

/// One tenant's buckets, shared: what a session holds so that each of its lines takes one lock
/// and no lookup ([`QuotaBook::tenant`]).
#[derive(Clone, Debug, Default)]
pub struct TenantQuota(Arc<Mutex<Buckets>>);

impl TenantQuota {
    fn lock(&self) -> std::sync::MutexGuard<'_, Buckets> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// One request under one lock, as the Write route judges it: the requests/s bucket (one
    /// request taken), then the bytes/s debt; then, when both pass and `charge` is given, its
    /// bytes charged (the bucket may go into debt, as [`QuotaBook::charge_bytes`] says).
    ///
    /// # Errors
    /// The rate the request is over and the wait; nothing is charged then.
    pub fn admit(&self, quotas: &Quotas, now: Instant, charge: Option<u64>) -> Result<(), Over> {
        let mut buckets = self.lock();
        take_request(&mut buckets.0, quotas, now).map_err(Over::Requests)?;
        owing_bytes(&mut buckets.1, quotas, now).map_err(Over::Bytes)?;
        if let Some(bytes) = charge {
            charge_bytes(&mut buckets.1, quotas, bytes, now);
        }
        Ok(())
    }
}

fn take_request(slot: &mut Option<Bucket>, quotas: &Quotas, now: Instant) -> Result<(), Duration> {
    let rate = f64::from(quotas.requests_per_s);
    slot.get_or_insert(Bucket { level: rate, at: now }).take(now, rate, 1.0)
}

fn owing_bytes(slot: &mut Option<Bucket>, quotas: &Quotas, now: Instant) -> Result<(), Duration> {
    #[allow(clippy::cast_precision_loss)]
    let rate = quotas.bytes_per_s as f64;
    slot.get_or_insert(Bucket { level: rate, at: now }).owing(now, rate)
}

fn charge_bytes(slot: &mut Option<Bucket>, quotas: &Quotas, bytes: u64, now: Instant) {
    #[allow(clippy::cast_precision_loss)]
    let (rate, n) = (quotas.bytes_per_s as f64, bytes as f64);
    slot.get_or_insert(Bucket { level: rate, at: now }).charge(now, rate, n);
}

/// Every tenant's buckets.
#[derive(Debug, Default)]
pub struct QuotaBook {
    buckets: Mutex<HashMap<TenantId, TenantQuota>>,
}

impl QuotaBook {
    /// `tenant`'s buckets (made at its first use); the same buckets every call of the tenant uses.
    pub fn tenant(&self, tenant: TenantId) -> TenantQuota {
        let mut book = self.buckets.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        book.entry(tenant).or_default().clone()
    }

    /// Admits one request of `tenant`, or says how long until one would be admitted.
    ///
    /// # Errors
    /// The wait, when the tenant is over its requests/s.
    pub fn admit_request(&self, tenant: TenantId, quotas: &Quotas, now: Instant) -> Result<(), Duration> {
        take_request(&mut self.tenant(tenant).lock().0, quotas, now)
    }

    /// Whether `tenant` may write now: refused while its bytes/s bucket is in debt (before the
    /// body is read, so the 429 wins over every body check, as the contract orders them).
    ///
    /// # Errors
    /// The wait until the debt is paid back.
    pub fn check_bytes(&self, tenant: TenantId, quotas: &Quotas, now: Instant) -> Result<(), Duration> {
        owing_bytes(&mut self.tenant(tenant).lock().1, quotas, now)
    }

    /// Charges `bytes` written by `tenant` (after the body parsed). The bucket may go into
    /// debt: one write over the remaining allowance passes, and the next waits it out.
    pub fn charge_bytes(&self, tenant: TenantId, quotas: &Quotas, bytes: u64, now: Instant) {
        charge_bytes(&mut self.tenant(tenant).lock().1, quotas, bytes, now);
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
        assert!(book.check_bytes(TenantId(1), &q, t0).is_ok());
        book.charge_bytes(TenantId(1), &q, 25, t0);
        let wait = book.check_bytes(TenantId(1), &q, t0).expect_err("15 bytes in debt at 10/s");
        assert!((1400..=1600).contains(&wait.as_millis()), "{wait:?}");
        assert!(book.check_bytes(TenantId(1), &q, t0 + Duration::from_millis(1600)).is_ok(), "paid back");
    }

    #[test]
    fn one_lock_admission_judges_requests_then_the_debt_and_charges_only_what_it_admits() {
        let book = QuotaBook::default();
        let q = Quotas { requests_per_s: 2, bytes_per_s: 10, journals_max: 1 };
        let t0 = Instant::now();
        let line = book.tenant(TenantId(1));
        assert_eq!(line.admit(&q, t0, Some(25)), Ok(()), "one write over the allowance passes");
        let Err(Over::Bytes(wait)) = line.admit(&q, t0, Some(1)) else { panic!("15 bytes in debt") };
        assert!((1400..=1600).contains(&wait.as_millis()), "{wait:?}");
        // The two requests/s are spent: the requests bucket speaks first, and charges nothing.
        let Err(Over::Requests(_)) = line.admit(&q, t0, Some(1000)) else { panic!("the third request") };
        let later = t0 + Duration::from_millis(1600);
        assert!(book.check_bytes(TenantId(1), &q, later).is_ok(), "the refused lines charged nothing");
        assert_eq!(book.admit_request(TenantId(1), &q, later), Ok(()), "the handle is the book's own buckets");
        assert_eq!(book.tenant(TenantId(2)).admit(&q, t0, None), Ok(()), "tenants have their own buckets");
    }
}
