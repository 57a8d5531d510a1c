//! The shared policies (switches, address lists) as each process holds
//! them, and when they are read again; and the process's tally of denials
//! (see [`crate::denials`]), which the same reader writes.

use crate::denials::Tally;
use crate::policy::{self, Shared};
use crate::process::ProcessLocal;
use crate::store::policies::load_shared;
use crate::store::{in_place, PolicyCalls, Store};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

/// How often a process reads the shared policies (switches, address lists) again by default.
pub const DEFAULT_POLICY_REFRESH: Duration = Duration::from_secs(2);

/// The shared policies (switches, address lists) as this process holds them.
///
/// On a remote store a request never waits on their periodic read: a
/// thread of this process's own reads them every `refresh`, whether requests
/// come or not, so a change made anywhere is held by every process within
/// `refresh` and one read (an idle process's first request included), while
/// every caller goes on with the view held. Only the first read in a
/// process, and the first after a change made in this process, are made by
/// the caller (without the GIL or GVL). The thread is this process's: a
/// forked child, whose view is built anew, starts its own; it ends when the
/// limiters using the view are gone.
pub(crate) struct SharedView {
    refresh: Duration,
    held: RwLock<Arc<Shared>>,
    /// The policy epoch last read at (`u64::MAX`: never read).
    read_at: Mutex<u64>,
    /// Whether this process's reading thread was started.
    reader: AtomicBool,
    /// This process's tally of the denials made on the store.
    pub(crate) tally: Tally,
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
        read_at: Mutex::new(u64::MAX),
        reader: AtomicBool::new(false),
        tally: Tally::new(),
    }))
}

impl SharedView {
    fn held(&self) -> Arc<Shared> {
        self.held.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Reads the policies now when their version moved (a failure keeps what is held).
    fn read(&self, store: &dyn Store) -> Arc<Shared> {
        match store.policy_version() {
            Ok(version) if version != self.held().version => self.hold(in_place(load_shared(
                &PolicyCalls::blocking(store),
                version,
            ))),
            _ => self.held(),
        }
    }

    /// [`SharedView::read`], awaited.
    #[cfg(feature = "async")]
    async fn read_async(&self, calls: &dyn crate::store::AsyncPolicyStore) -> Arc<Shared> {
        match calls.policy_version_async().await {
            Ok(version) if version != self.held().version => {
                self.hold(load_shared(calls, version).await)
            }
            _ => self.held(),
        }
    }

    /// Holds the policies just read (a failed read keeps those held) and
    /// returns what is held.
    fn hold(&self, read: crate::error::Result<Shared>) -> Arc<Shared> {
        match read {
            Ok(fresh) => {
                let fresh = Arc::new(fresh);
                *self.held.write().unwrap_or_else(|p| p.into_inner()) = fresh.clone();
                fresh
            }
            Err(_) => self.held(),
        }
    }
}

/// What a caller does for the policies now: take those held, or read them
/// itself (see [`SharedView`]).
enum Due<'v> {
    Held(Arc<Shared>),
    Read(&'v SharedView),
}

fn due<'v>(view: &'v Policies, store: &Arc<dyn Store>) -> Due<'v> {
    let local = view.get();
    if !store.waits_on_io() {
        return Due::Read(local);
    }
    let held = local.held();
    let Ok(mut read_at) = local.read_at.try_lock() else {
        return Due::Held(held);
    };
    let epoch = policy::epoch();
    if *read_at == epoch {
        return Due::Held(held);
    }
    *read_at = epoch;
    drop(read_at);
    start_reader(view, store, local);
    Due::Read(local)
}

/// The policies now (see [`SharedView`]).
pub(crate) fn current_policies(view: &Policies, store: &Arc<dyn Store>) -> Arc<Shared> {
    match due(view, store) {
        Due::Held(held) => held,
        Due::Read(local) => local.read(&**store),
    }
}

/// [`current_policies`], a read the caller makes awaited.
#[cfg(feature = "async")]
pub(crate) async fn current_policies_async(view: &Policies, store: &Arc<dyn Store>) -> Arc<Shared> {
    match due(view, store) {
        Due::Held(held) => held,
        Due::Read(local) => local.read_async(&PolicyCalls::awaited(&**store)).await,
    }
}

/// Starts this process's thread that reads the policies, and writes its
/// tally of denials, every `refresh` (once per view and process; on a
/// memory store, whose policies need no reader, at the first denial). It
/// holds the view and the store weakly and ends when they are gone.
pub(crate) fn start_reader(view: &Policies, store: &Arc<dyn Store>, local: &SharedView) {
    if local.reader.swap(true, Ordering::AcqRel) {
        return;
    }
    WRITERS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push((Arc::downgrade(view), Arc::downgrade(store)));
    let (view, store) = (Arc::downgrade(view), Arc::downgrade(store));
    let refresh = local.refresh;
    let spawned = std::thread::Builder::new()
        .name("ratekeeper-policies".into())
        .spawn(move || loop {
            std::thread::sleep(refresh);
            let (Some(view), Some(store)) = (view.upgrade(), store.upgrade()) else {
                return;
            };
            let local = view.get();
            local.read(&*store);
            if let Err(e) = local.tally.flush(&*store) {
                log::debug!("the record of denials was not written: {e}");
            }
        });
    if spawned.is_err() {
        // no thread to be had: the next caller tries again
        local.reader.store(false, Ordering::Release);
        *local.read_at.lock().unwrap_or_else(|p| p.into_inner()) = u64::MAX;
    }
}

/// The views whose tally a reader writes, and their stores (held weakly):
/// what [`flush_denials`] writes once more.
type Writer = (Weak<ProcessLocal<SharedView>>, Weak<dyn Store>);
static WRITERS: Mutex<Vec<Writer>> = Mutex::new(Vec::new());
/// The process whose [`flush_denials`] found the store not answering (0:
/// none): it is going, and a limiter dropped after it does not wait again.
static FAILED_IN: AtomicU32 = AtomicU32::new(0);

/// Writes this process's record of denials now, on every store a reader
/// writes it to, within one `timeout` in all (what a process does as it
/// exits, so that the denials since the reader's last write are not lost:
/// a script's, a job's, a recycled worker's). A failed write is logged at
/// debug and dropped: the process is going.
pub fn flush_denials() {
    // (a child forked while another thread held the list finds it taken: it skips)
    let writers: Vec<(Policies, Arc<dyn Store>)> = match WRITERS.try_lock() {
        Ok(list) => list
            .iter()
            .filter_map(|(view, store)| Some((view.upgrade()?, store.upgrade()?)))
            .collect(),
        Err(_) => return,
    };
    crate::store::deadline::within(|| {
        for (view, store) in writers {
            if let Err(e) = view.get().tally.flush(&*store) {
                FAILED_IN.store(std::process::id(), Ordering::Release);
                log::debug!("the record of denials was not written at exit: {e}");
            }
        }
    });
}

/// Writes what `view`'s tally holds unwritten to `store` now (nothing to
/// write: no call), within one `timeout`: the last limiter of a view is
/// going, and its reader with it (a job's limiter made in a function).
pub(crate) fn flush_view(view: &Policies, store: &dyn Store) {
    if FAILED_IN.load(Ordering::Acquire) == std::process::id() {
        return;
    }
    crate::store::deadline::within(|| {
        if let Err(e) = view.get().tally.flush(store) {
            log::debug!("the record of denials was not written: {e}");
        }
    });
}

/// Whether `view` holds the policies as of this process's last change (a
/// read of them would not wait on the store). The memory store's always are.
pub(crate) fn ready(view: &Policies, store: &Arc<dyn Store>) -> bool {
    if !store.waits_on_io() {
        return true;
    }
    let local = view.get();
    let read = local.held().version != u64::MAX;
    let read_at = local.read_at.try_lock();
    read && read_at.is_ok_and(|at| *at == policy::epoch())
}
