//! The shared controls (switches, address lists) as each process holds
//! them, and when they are read again; and the process's tally of denials
//! (see [`crate::denials`]), which the same reader writes.

use crate::controls::{self, Shared};
use crate::denials::Tally;
use crate::process::ProcessLocal;
use crate::store::controls::load_shared;
use crate::store::{in_place, ControlCalls, Store};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, LazyLock, Mutex, RwLock, Weak};
use std::time::Duration;

/// How often a process reads the shared controls (switches, address lists) again by default.
pub const DEFAULT_CONTROLS_REFRESH: Duration = Duration::from_secs(2);

/// The shared controls (switches, address lists) as this process holds them.
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
    /// The controls epoch last read at (`u64::MAX`: never read).
    read_at: Mutex<u64>,
    /// Whether this process's reading thread was started.
    reader: AtomicBool,
    /// This process's tally of the denials made on the store.
    pub(crate) tally: Tally,
}

/// The view of the controls each process holds, shared by the limiters of one store.
pub(crate) type Controls = Arc<ProcessLocal<SharedView>>;

pub(crate) fn controls(refresh: Duration) -> Controls {
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

    /// Reads the controls now when their version moved (a failure keeps what is held).
    fn read(&self, store: &dyn Store) -> Arc<Shared> {
        match store.controls_version() {
            Ok(version) if version != self.held().version => self.hold(in_place(load_shared(
                &ControlCalls::blocking(store),
                version,
            ))),
            _ => self.held(),
        }
    }

    /// [`SharedView::read`], awaited.
    #[cfg(feature = "async")]
    async fn read_async(&self, calls: &dyn crate::store::AsyncControlStore) -> Arc<Shared> {
        match calls.controls_version_async().await {
            Ok(version) if version != self.held().version => {
                self.hold(load_shared(calls, version).await)
            }
            _ => self.held(),
        }
    }

    /// Holds the controls just read (a failed read keeps those held) and
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

/// What a caller does for the controls now: take those held, or read them
/// itself (see [`SharedView`]).
enum Due<'v> {
    Held(Arc<Shared>),
    Read(&'v SharedView),
}

fn due<'v>(view: &'v Controls, store: &Arc<dyn Store>) -> Due<'v> {
    let local = view.get();
    if !store.waits_on_io() {
        return Due::Read(local);
    }
    let held = local.held();
    let Ok(mut read_at) = local.read_at.try_lock() else {
        return Due::Held(held);
    };
    let epoch = controls::epoch();
    if *read_at == epoch {
        return Due::Held(held);
    }
    *read_at = epoch;
    drop(read_at);
    start_reader(view, store, local);
    Due::Read(local)
}

/// The controls now (see [`SharedView`]).
pub(crate) fn current_controls(view: &Controls, store: &Arc<dyn Store>) -> Arc<Shared> {
    match due(view, store) {
        Due::Held(held) => held,
        Due::Read(local) => local.read(&**store),
    }
}

/// [`current_controls`], a read the caller makes awaited.
#[cfg(feature = "async")]
pub(crate) async fn current_controls_async(view: &Controls, store: &Arc<dyn Store>) -> Arc<Shared> {
    match due(view, store) {
        Due::Held(held) => held,
        Due::Read(local) => local.read_async(&ControlCalls::awaited(&**store)).await,
    }
}

impl super::Limiter {
    /// What an awaited call does before its in-process step (which takes
    /// the controls by [`current_controls`]): when a read of the shared
    /// controls falls due (a change made in this process since the last),
    /// it is made here, awaited, so that step takes them held and never
    /// holds the runtime's thread on the store (a frozen Redis then held
    /// every task on that thread a timeout more).
    #[cfg(feature = "async")]
    pub(crate) async fn controls_due_async(&self) {
        if self.warden.store.waits_on_io() {
            current_controls_async(&self.warden.shared, &self.warden.store).await;
        }
    }
}

/// Starts this process's thread that reads the controls, and writes its
/// tally of denials, every `refresh` (once per view and process; on a
/// memory store, whose controls need no reader, at the first denial). It
/// holds the view and the store weakly and ends when they are gone.
pub(crate) fn start_reader(view: &Controls, store: &Arc<dyn Store>, local: &SharedView) {
    if local.reader.swap(true, Ordering::AcqRel) {
        return;
    }
    {
        let mut writers = writers();
        // (those of limiters gone are dropped as others come)
        writers
            .live
            .retain(|(view, store)| view.strong_count() > 0 && store.strong_count() > 0);
        writers
            .live
            .push((Arc::downgrade(view), Arc::downgrade(store)));
    }
    let (view, store) = (Arc::downgrade(view), Arc::downgrade(store));
    let refresh = local.refresh;
    let spawned = std::thread::Builder::new()
        .name("ratekeeper-controls".into())
        .spawn(move || loop {
            std::thread::sleep(refresh);
            let (Some(view), Some(store)) = (view.upgrade(), store.upgrade()) else {
                return;
            };
            let local = view.get();
            local.read(&*store);
            if let Err(e) = local.tally.flush(&*store) {
                log::debug!("the record of denials was not written: {e}");
            } else if !local.tally.unwritten() {
                written(&view);
            }
        });
    if spawned.is_err() {
        // no thread to be had: the next caller tries again
        local.reader.store(false, Ordering::Release);
        *local.read_at.lock().unwrap_or_else(|p| p.into_inner()) = u64::MAX;
    }
}

/// A view whose reader writes its tally, and the store it writes to.
type Writer = (Weak<ProcessLocal<SharedView>>, Weak<dyn Store>);

/// This process's writers of the record of denials (a forked child starts
/// with none, so it never waits on a lock held at the fork): the views of
/// live limiters, held weakly, and those whose last limiter went with
/// denials unwritten, held until their reader has written them (or the
/// process writes them as it exits).
#[derive(Default)]
struct Writers {
    live: Vec<Writer>,
    left: Vec<(Controls, Arc<dyn Store>)>,
}

static WRITERS: LazyLock<ProcessLocal<Mutex<Writers>>> =
    LazyLock::new(|| ProcessLocal::new(|| Mutex::new(Writers::default())));

fn writers() -> std::sync::MutexGuard<'static, Writers> {
    WRITERS.get().lock().unwrap_or_else(|p| p.into_inner())
}

/// The process that has written its record as it exits (0: none).
static EXITED_IN: AtomicU32 = AtomicU32::new(0);

/// The last limiter of `view` is going: what its tally holds unwritten is
/// kept, with the store, for its reader's next write (or the write at
/// exit), never written here (a drop must not wait on the store).
pub(crate) fn leave(view: &Controls, store: &Arc<dyn Store>) {
    if view.get().tally.unwritten() {
        writers().left.push((view.clone(), store.clone()));
    }
}

/// `view`'s reader has written all it held: a view left behind is let go.
fn written(view: &Controls) {
    let mut writers = writers();
    if !writers.left.is_empty() {
        writers.left.retain(|(left, _)| !Arc::ptr_eq(left, view));
    }
}

/// Writes this process's record of denials now (what each reader holds
/// unwritten since its last write, every `controls_refresh`), on every store
/// it goes to, within one `timeout` in all. A failed write is logged at
/// debug; what it held stays to be written.
pub fn flush_denials() {
    let pending: Vec<(Controls, Arc<dyn Store>)> = {
        let writers = writers();
        writers
            .live
            .iter()
            .filter_map(|(view, store)| Some((view.upgrade()?, store.upgrade()?)))
            .chain(writers.left.iter().cloned())
            .collect()
    };
    crate::store::one_wait::within(|| {
        for (view, store) in pending {
            if let Err(e) = view.get().tally.flush(&*store) {
                log::debug!("the record of denials was not written: {e}");
            }
        }
    });
}

/// [`flush_denials`] as a process exits, once however many of its exit
/// hooks call it (Python's `atexit` and a `multiprocessing` child's end may
/// both run): a script's, a job's or a recycled worker's last denials.
pub fn flush_denials_at_exit() {
    let me = std::process::id();
    if EXITED_IN.swap(me, Ordering::AcqRel) != me {
        flush_denials();
    }
}

/// Whether `view` holds the controls as of this process's last change (a
/// read of them would not wait on the store). The memory store's always are.
pub(crate) fn ready(view: &Controls, store: &Arc<dyn Store>) -> bool {
    if !store.waits_on_io() {
        return true;
    }
    let local = view.get();
    let read = local.held().version != u64::MAX;
    let read_at = local.read_at.try_lock();
    read && read_at.is_ok_and(|at| *at == controls::epoch())
}
