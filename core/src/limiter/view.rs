//! The shared policies (switches, address lists) as each process holds
//! them, and when they are read again.

use crate::policy::{self, Shared};
use crate::process::ProcessLocal;
use crate::store::policies::load_shared;
use crate::store::Store;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// How often a process reads the shared policies (switches, address lists) again by default.
pub const DEFAULT_POLICY_REFRESH: Duration = Duration::from_secs(2);

/// The shared policies (switches, address lists) as this process holds them.
///
/// On a remote store a request never waits on their periodic read: when one
/// is due, a background thread reads them while every caller goes on with the
/// view held. Only the first read in a process, and the first after a change
/// made in this process, are made by the caller (without the GIL or GVL).
pub(crate) struct SharedView {
    refresh: Duration,
    held: RwLock<Arc<Shared>>,
    /// When to read next, and the policy epoch last seen (`u64::MAX`: never read).
    next: Mutex<(Instant, u64)>,
    /// Whether a background read is under way.
    reading: AtomicBool,
}

/// The policy view of each process, shared by the limiters of one store.
pub(crate) type Policies = Arc<ProcessLocal<SharedView>>;

pub(crate) fn policies(refresh: Duration) -> Policies {
    Arc::new(ProcessLocal::new(move || SharedView {
        refresh,
        held: RwLock::new(Arc::new(Shared {
            version: u64::MAX,
            ..Shared::default()
        })),
        next: Mutex::new((Instant::now(), u64::MAX)),
        reading: AtomicBool::new(false),
    }))
}

impl SharedView {
    fn held(&self) -> Arc<Shared> {
        self.held.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Reads the policies now when their version moved (a failure keeps what is held).
    fn read(&self, store: &dyn Store) -> Arc<Shared> {
        let held = self.held();
        match store.policy_version() {
            Ok(version) if version != held.version => match load_shared(store, version) {
                Ok(fresh) => {
                    let fresh = Arc::new(fresh);
                    *self.held.write().unwrap_or_else(|p| p.into_inner()) = fresh.clone();
                    fresh
                }
                Err(_) => held,
            },
            _ => held,
        }
    }
}

/// The policies now (see [`SharedView`]).
pub(crate) fn current_policies(view: &Policies, store: &Arc<dyn Store>) -> Arc<Shared> {
    let local = view.get();
    if !store.waits_on_io() {
        return local.read(&**store);
    }
    let held = local.held();
    let Ok(mut next) = local.next.try_lock() else {
        return held;
    };
    let (now, epoch) = (Instant::now(), policy::epoch());
    if now < next.0 && next.1 == epoch {
        return held;
    }
    let first_or_changed_here = next.1 != epoch;
    *next = (now + local.refresh, epoch);
    drop(next);
    if first_or_changed_here {
        return local.read(&**store);
    }
    if !local.reading.swap(true, Ordering::AcqRel) {
        let (view, store) = (view.clone(), store.clone());
        let spawned = std::thread::Builder::new()
            .name("ratekeeper-policies".into())
            .spawn(move || {
                let local = view.get();
                local.read(&*store);
                local.reading.store(false, Ordering::Release);
            });
        if spawned.is_err() {
            local.reading.store(false, Ordering::Release);
        }
    }
    held
}

/// Whether `view` holds the policies as of this process's last change (a
/// read of them would not wait on the store). The memory store's always are.
pub(crate) fn ready(view: &Policies, store: &Arc<dyn Store>) -> bool {
    if !store.waits_on_io() {
        return true;
    }
    let local = view.get();
    let read = local.held().version != u64::MAX;
    let next = local.next.try_lock();
    read && next.is_ok_and(|next| next.1 == policy::epoch())
}
