//! A pool of Redis connections with no threads of its own.
//!
//! A connection is made by the caller that needs one (within the connect
//! timeout, without the GIL or GVL), lent, and put back unless it broke. There
//! is no background thread to lose in a forked child and no lock outside the
//! pool's own (r2d2's worker threads park on parking_lot's process-wide
//! table, which a child inherits with the parent's parked threads in it: a
//! child that used a pool built before the fork crashed).

use std::ops::{Deref, DerefMut};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Makes connections and tells broken ones.
pub(crate) trait Connect {
    /// A connection of the pool's kind.
    type Conn;
    /// Why a connection could not be made.
    type Error;
    /// A new connection made (set up included) by `deadline`, or why there is none.
    fn connect(&self, deadline: Instant) -> Result<Self::Conn, Self::Error>;
    /// Whether a connection must not be lent again.
    fn is_broken(&self, conn: &mut Self::Conn) -> bool;
}

/// Why the pool lent no connection.
#[derive(Debug)]
pub(crate) enum GetError<E> {
    /// Making a new one failed.
    Connect(E),
    /// All were lent, and none came back within the wait.
    Busy(String),
}

struct State<C> {
    idle: Vec<C>,
    /// Connections open now, idle or lent.
    open: u32,
    /// Callers waiting for one put back: a connection put back wakes one
    /// only when there is one (waking none is still a system call).
    waiting: u32,
}

/// At most `max` connections, idle ones reused last in, first out.
pub(crate) struct Pool<M: Connect> {
    maker: M,
    state: Mutex<State<M::Conn>>,
    returned: Condvar,
    max: u32,
    /// Longest wait for a connection when all `max` are lent.
    wait: Duration,
}

impl<M: Connect> Pool<M> {
    /// An empty pool: connections are made as they are needed.
    pub(crate) fn new(maker: M, max: u32, wait: Duration) -> Pool<M> {
        Pool {
            maker,
            state: Mutex::new(State {
                idle: Vec::new(),
                open: 0,
                waiting: 0,
            }),
            returned: Condvar::new(),
            max,
            wait,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<M::Conn>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An idle connection, else a new one made by `by` when fewer than `max`
    /// are open, else the first one put back within the wait (and by `by`).
    pub(crate) fn get(&self, by: Instant) -> Result<Lent<'_, M>, GetError<M::Error>> {
        let started = Instant::now();
        let deadline = (started + self.wait).min(by);
        let mut state = self.lock();
        loop {
            if let Some(conn) = state.idle.pop() {
                return Ok(self.lend(conn));
            }
            if state.open < self.max {
                state.open += 1;
                drop(state);
                return match self.maker.connect(by) {
                    Ok(conn) => Ok(self.lend(conn)),
                    Err(e) => {
                        self.closed();
                        Err(GetError::Connect(e))
                    }
                };
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(GetError::Busy(format!(
                    "all {} connections of this process were in use for {} ms (raise pool_size)",
                    self.max,
                    (now - started).as_millis()
                )));
            }
            state.waiting += 1;
            state = self
                .returned
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
            state.waiting -= 1;
        }
    }

    fn lend(&self, conn: M::Conn) -> Lent<'_, M> {
        Lent {
            pool: self,
            conn: Some(conn),
        }
    }

    /// One connection fewer is open: a waiter may make one.
    fn closed(&self) {
        let mut state = self.lock();
        state.open -= 1;
        self.wake(state);
    }

    /// Wakes one caller waiting for a connection, if one is.
    fn wake(&self, state: MutexGuard<'_, State<M::Conn>>) {
        let waiting = state.waiting > 0;
        drop(state);
        if waiting {
            self.returned.notify_one();
        }
    }
}

/// A connection lent by a [`Pool`]: put back when dropped, unless broken.
pub(crate) struct Lent<'p, M: Connect> {
    pool: &'p Pool<M>,
    conn: Option<M::Conn>,
}

impl<M: Connect> Deref for Lent<'_, M> {
    type Target = M::Conn;
    fn deref(&self) -> &M::Conn {
        self.conn.as_ref().expect("lent until dropped")
    }
}

impl<M: Connect> DerefMut for Lent<'_, M> {
    fn deref_mut(&mut self) -> &mut M::Conn {
        self.conn.as_mut().expect("lent until dropped")
    }
}

impl<M: Connect> Drop for Lent<'_, M> {
    fn drop(&mut self) {
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        if self.pool.maker.is_broken(&mut conn) {
            drop(conn);
            self.pool.closed();
        } else {
            let mut state = self.pool.lock();
            state.idle.push(conn);
            self.pool.wake(state);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;

    fn later() -> Instant {
        Instant::now() + Duration::from_secs(60)
    }

    /// Numbers its connections; a connection is broken when negative.
    struct Counter(AtomicU32);

    impl Connect for Counter {
        type Conn = i64;
        type Error = ();
        fn connect(&self, _deadline: Instant) -> Result<i64, ()> {
            Ok(self.0.fetch_add(1, Ordering::SeqCst) as i64)
        }
        fn is_broken(&self, conn: &mut i64) -> bool {
            *conn < 0
        }
    }

    #[test]
    fn reuses_replaces_broken_and_bounds_connections() {
        let pool = Pool::new(Counter(AtomicU32::new(0)), 2, Duration::from_millis(50));
        let first = *pool.get(later()).unwrap();
        assert_eq!(
            *pool.get(later()).unwrap(),
            first,
            "an idle connection is reused"
        );
        {
            let mut broken = pool.get(later()).unwrap();
            *broken = -1;
        }
        assert_eq!(*pool.get(later()).unwrap(), 1, "a broken one is replaced");
        let (a, b) = (pool.get(later()).unwrap(), pool.get(later()).unwrap());
        match pool.get(later()).err().unwrap() {
            GetError::Busy(busy) => assert!(busy.contains("all 2 connections"), "{busy}"),
            other => panic!("{other:?}"),
        }
        drop((a, b));
        assert!(pool.get(later()).is_ok());
    }

    #[test]
    fn a_wait_for_a_connection_ends_at_the_callers_deadline() {
        let pool = Pool::new(Counter(AtomicU32::new(0)), 1, Duration::from_secs(5));
        let _lent = pool.get(later()).unwrap();
        let start = Instant::now();
        let busy = pool.get(start + Duration::from_millis(50));
        assert!(matches!(busy, Err(GetError::Busy(_))));
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "{:?}",
            start.elapsed()
        );
    }

    #[test]
    fn a_waiter_gets_the_connection_put_back() {
        let pool = Arc::new(Pool::new(
            Counter(AtomicU32::new(0)),
            1,
            Duration::from_secs(5),
        ));
        let lent = pool.get(later()).unwrap();
        let waiter = {
            let pool = pool.clone();
            std::thread::spawn(move || *pool.get(later()).unwrap())
        };
        std::thread::sleep(Duration::from_millis(50));
        drop(lent);
        assert_eq!(waiter.join().unwrap(), 0);
    }

    #[test]
    fn a_waiter_makes_a_connection_when_the_lent_one_breaks() {
        let pool = Arc::new(Pool::new(
            Counter(AtomicU32::new(0)),
            1,
            Duration::from_secs(5),
        ));
        let mut lent = pool.get(later()).unwrap();
        let waiter = {
            let pool = pool.clone();
            std::thread::spawn(move || *pool.get(later()).unwrap())
        };
        std::thread::sleep(Duration::from_millis(50));
        *lent = -1;
        drop(lent);
        assert_eq!(
            waiter.join().unwrap(),
            1,
            "a new connection, the broken one closed"
        );
    }

    #[test]
    fn every_waiter_of_a_busy_pool_is_served() {
        // 8 threads taking turns with 2 connections, 200 times each: a
        // connection put back wakes a waiter whenever one waits (a lost
        // wakeup would end a wait at its 5 s bound, as Busy)
        let pool = Arc::new(Pool::new(
            Counter(AtomicU32::new(0)),
            2,
            Duration::from_secs(5),
        ));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let pool = pool.clone();
                std::thread::spawn(move || {
                    (0..200)
                        .filter(|_| {
                            let lent = pool.get(later());
                            std::thread::yield_now();
                            lent.is_ok()
                        })
                        .count()
                })
            })
            .collect();
        let served: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert_eq!(served, 1_600);
        assert_eq!(pool.lock().waiting, 0);
        assert!(pool.lock().open <= 2);
    }
}
