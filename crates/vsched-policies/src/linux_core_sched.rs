//! Linux core scheduling (`CONFIG_SCHED_CORE`, since Linux 5.14) for `cfs`, `eevdf` and the
//! KVM policies on them: the parameter `core_sched = "vm"` gives each VM's vCPU threads a
//! cookie of their own, as `prctl(PR_SCHED_CORE, PR_SCHED_CORE_CREATE, pid, PIDTYPE_TGID)` on
//! each VM's process does, and the hardware threads of a core then run tasks of one cookie at
//! a time. Read from Linux 6.12.19: kernel/sched/core.c (`pick_next_task` under
//! `sched_core_enabled`, `sched_core_enqueue` / `sched_core_dequeue`, `sched_core_find`,
//! `try_steal_cookie`, `sched_core_balance`), fair.c (`cfs_prio_less`, `se_fi_update`,
//! `task_tick_core`, `__select_idle_cpu`) and sched.h (`sched_cpu_cookie_match`).
//!
//! # The rule
//! When any thread of a core schedules, it picks for the whole core. Each sibling's run queue
//! names its best task as it would alone (`pick_task`, its running task included); the best of
//! those (`prio_less`: for fair tasks, `cfs_prio_less` compares vruntimes, each less its queue's
//! `min_vruntime_fi`) sets the core's cookie. Every sibling then runs its own best task if that
//! has the cookie, else its best task of that cookie (`sched_core_find`, by vruntime), else
//! nothing: it is *forced idle* while tasks wait on it. Siblings whose pick changed are sent a
//! reschedule, and take the pick made for them when they schedule, unless a task was queued
//! or left a queue of the core meanwhile (`core_task_seq` against `core_pick_seq`).
//! - Forced idle freezes the normalisation: while a sibling is forced idle, each queue's
//!   `min_vruntime_fi` stays where it was when the forced idle began (`se_fi_update` with the
//!   core's `core_forceidle_seq`), so the idle sibling's waiting task gains on the running one
//!   and wins a later pick.
//! - A task that keeps a sibling forced idle is rescheduled at a tick once it has run half its
//!   slice alone on its queue (`task_tick_core`, `MIN_NR_TASKS_DURING_FORCEIDLE` = 2).
//! - A thread that goes forced idle steals a waiting task of the core's cookie from another
//!   pCPU, nearest domains first (`queue_core_balance` → `sched_core_balance` →
//!   `try_steal_cookie`): never a running or already picked one, never one whose last pick
//!   filled more of its core than this core is filled (`core_occupation`).
//! - A waking task's scan for an idle pCPU skips those whose core runs another cookie
//!   (`__select_idle_cpu` → `sched_cpu_cookie_match`); the previous pCPU, a fully idle core
//!   and an idle sibling of the previous pCPU are taken without the test, as in 6.12.
//! - Cookie 0 (the host's own threads here, untagged) matches only cookie 0 and the idle task.
//!
//! # Figures
//! Forced idle is reported per VM as Linux's per-task `core_forceidle_sum`
//! (`sched_core_account_forceidle`: each forced-idle interval × forced-idle threads ÷ busy
//! threads, charged to the tasks that ran), and for the host as the policy counter
//! `core_sched.forced_idle_ns` (thread-ns forced idle). A traced run has the pCPU counter
//! `forced idle` (1 while the thread is forced idle).
//!
//! # Approximations
//! Every task is a fair task (no RT or stop class) and the comparison is between tasks, not
//! group entities (vsched leaves cgroups out, `cfs.rs`). `eevdf` normalises by the queue's
//! average vruntime V, which it keeps, instead of the `min_vruntime` it does not. A steal and
//! the pick that follows it happen in the same `pick_next` (Linux switches to idle first and
//! reschedules from the balance callback). New vCPU threads are placed without the cookie test
//! of `find_idlest_group_cpu`, and the periodic balance refuses a task whose cookie the
//! destination core does not run (`task_hot` makes it cache-hot; Linux may still move it after
//! repeated balance failures). With one thread per core the selection is each pCPU's own pick,
//! so `core_sched` changes nothing there and is then ignored.

use vsched_model::{
    ConfigError, CounterOf, Cx, DomId, ParamDefault, ParamRange, ParamSpec, Params, PcpuId, Time, VcpuId,
};

/// `MIN_NR_TASKS_DURING_FORCEIDLE` (fair.c): a task forcing a sibling idle gets half a slice.
const MIN_NR_TASKS_DURING_FORCEIDLE: i64 = 2;
/// The trace counter of a forced-idle pCPU.
const FORCED_IDLE_TRACK: &str = "forced idle";

pub(crate) const PARAM: ParamSpec = ParamSpec {
    name: "core_sched",
    default: ParamDefault::Str("off"),
    range: ParamRange::Any,
    doc: "Linux core scheduling (5.14+): \"off\", or \"vm\" (a cookie per VM; host threads untagged)",
};

/// `core_sched` from the policy's parameters: whether each VM gets a cookie.
pub(crate) fn from_params(params: &Params) -> Result<bool, ConfigError> {
    Ok(params.choice("core_sched", &["off", "vm"])? == "vm")
}

/// What a fair class's run queues tell the core-wide pick.
pub(crate) trait FairQueues {
    /// `pick_task`: what `p` would run next on its own, its running task included, without
    /// taking it; `None` for idle. May settle the queue first (update its clock, finish
    /// delayed dequeues).
    fn pick_task(&mut self, cx: &mut Cx, p: PcpuId) -> Option<VcpuId>;
    /// The runnable tasks queued on `p`, its running one included (the core tree's).
    fn queued(&self, p: PcpuId) -> Vec<VcpuId>;
    fn vruntime(&self, v: VcpuId) -> i64;
    /// The queue's reference for `cfs_prio_less` (`min_vruntime`).
    fn min_vruntime(&self, p: PcpuId) -> i64;
    /// `rq->nr_running`.
    fn nr_running(&self, p: PcpuId) -> usize;
    /// The class's core-scheduling state.
    fn core(&mut self) -> &mut CoreSched;

    /// The core-wide pick on `p` ([`CoreSched::pick`], which reads these queues).
    fn core_select(&mut self, cx: &mut Cx, p: PcpuId) -> Option<VcpuId>
    where
        Self: Sized,
    {
        let mut core = std::mem::take(self.core());
        let pick = core.pick(cx, self, p);
        *self.core() = core;
        pick
    }
}

/// A core's shared state (`rq->core->core_*`), kept at its first thread's index.
#[derive(Clone, Default)]
struct Core {
    task_seq: u64,
    pick_seq: u64,
    cookie: u32,
    forceidle_count: u32,
    forceidle_seq: u64,
    forceidle_start: Time,
    occupation: u32,
}

/// A hardware thread's state (`rq->core_*`).
#[derive(Clone, Default)]
struct Thread {
    /// The pick a sibling made for this thread and not yet taken: `Some(None)` is idle.
    pick: Option<Option<VcpuId>>,
    sched_seq: u64,
    min_vruntime_fi: i64,
    forceidle_seq: u64,
    /// `rq->idle->core_occupation`: busy threads when this one was last picked idle.
    idle_occupation: u32,
    /// Shown as forced idle in the trace.
    traced_forced_idle: bool,
}

#[derive(Default)]
pub(crate) struct CoreSched {
    on: bool,
    cores: Vec<Core>,
    threads: Vec<Thread>,
    /// Each vCPU's cookie: its domain + 1, 0 for the host's own threads.
    cookie: Vec<u32>,
    /// `core_occupation` of each vCPU's last pick.
    occupation: Vec<u32>,
    /// `core_forceidle_sum` per domain, ns.
    forceidle_sum_ns: Vec<u64>,
}

impl CoreSched {
    /// Contract: called from the policy's `init`; `wanted` is the `core_sched` parameter.
    pub(crate) fn init(&mut self, cx: &Cx, wanted: bool) {
        let n = cx.n_pcpus();
        self.on = wanted && (0..n).any(|p| cx.core_threads(p).len() > 1);
        if !self.on {
            return;
        }
        self.cores = vec![Core::default(); n];
        self.threads = vec![Thread::default(); n];
        self.cookie = vec![0; cx.n_vcpus()];
        self.occupation = vec![0; cx.n_vcpus()];
        self.forceidle_sum_ns = vec![0; cx.domains().len()];
    }

    pub(crate) fn on(&self) -> bool {
        self.on
    }

    fn core_index(&self, cx: &Cx, p: PcpuId) -> usize {
        cx.core_threads(p).start
    }

    /// A vCPU thread is created: its cookie is its VM's (a host thread's is 0).
    pub(crate) fn insert(&mut self, cx: &Cx, v: VcpuId) {
        if self.on {
            let d = cx.dom_of(v);
            self.cookie[v] = if cx.domain(d).host_threads { 0 } else { d as u32 + 1 };
        }
    }

    /// `sched_core_enqueue`: a task joined `p`'s queue.
    pub(crate) fn enqueued(&mut self, cx: &Cx, p: PcpuId) {
        if self.on {
            let c = self.core_index(cx, p);
            self.cores[c].task_seq += 1;
        }
    }

    /// `sched_core_dequeue`: a task left `p`'s queue, which now holds `nr_running`; a
    /// forced-idle pCPU that lost its last task reschedules to end its forced idle.
    pub(crate) fn dequeued(&mut self, cx: &mut Cx, p: PcpuId, nr_running: usize) {
        if !self.on {
            return;
        }
        let c = self.core_index(cx, p);
        self.cores[c].task_seq += 1;
        if nr_running == 0 && self.cores[c].forceidle_count > 0 && cx.curr(p).is_none() {
            cx.resched(p);
        }
    }

    /// `sched_cpu_cookie_match`: may `v` count `p` as idle in the wake-up scan?
    pub(crate) fn cookie_match(&self, cx: &Cx, p: PcpuId, v: VcpuId) -> bool {
        !self.on || self.cores[self.core_index(cx, p)].cookie == self.cookie[v]
    }

    /// `sched_core_cookie_match`: `p`'s core is idle or runs `v`'s cookie.
    pub(crate) fn core_cookie_match(&self, cx: &Cx, p: PcpuId, v: VcpuId) -> bool {
        !self.on || cx.core_threads(p).all(|q| cx.curr(q).is_none()) || self.cookie_match(cx, p, v)
    }

    /// The fast path of `pick_next_task`: the pick a sibling made for `p`, if no task joined
    /// or left a queue of the core since. `Some(None)` is idle.
    pub(crate) fn take_pick(&mut self, cx: &Cx, p: PcpuId) -> Option<Option<VcpuId>> {
        let core = &self.cores[self.core_index(cx, p)];
        let t = &mut self.threads[p];
        if core.pick_seq != core.task_seq || core.pick_seq == t.sched_seq {
            return None;
        }
        let pick = t.pick.take()?;
        t.sched_seq = core.pick_seq;
        Some(pick)
    }

    /// `cfs_prio_less(a, b)`: `a`, on `pa`'s queue, runs after `b`, on `pb`'s.
    fn prio_less(&self, q: &dyn FairQueues, (a, pa): (VcpuId, PcpuId), (b, pb): (VcpuId, PcpuId)) -> bool {
        let delta =
            (q.vruntime(a) - q.vruntime(b)) + (self.threads[pb].min_vruntime_fi - self.threads[pa].min_vruntime_fi);
        delta > 0
    }

    /// `se_fi_update` for `p`'s queue: follow its `min_vruntime`, or, in forced idle, freeze
    /// it once per forced-idle period.
    fn fi_update(&mut self, q: &dyn FairQueues, c: usize, p: PcpuId, in_fi: bool) {
        let seq = self.cores[c].forceidle_seq;
        let t = &mut self.threads[p];
        if in_fi {
            if t.forceidle_seq == seq {
                return;
            }
            t.forceidle_seq = seq;
        }
        t.min_vruntime_fi = q.min_vruntime(p);
    }

    /// The best task of cookie `cookie` queued on `p` (`sched_core_find`: lowest vruntime,
    /// lowest id on ties).
    fn find(&self, q: &dyn FairQueues, p: PcpuId, cookie: u32) -> Option<VcpuId> {
        q.queued(p).into_iter().filter(|&v| self.cookie[v] == cookie).min_by_key(|&v| (q.vruntime(v), v))
    }

    /// `sched_core_account_forceidle`: charge the forced idle since it began to the tasks of
    /// the core's threads (each one's pending pick, else its running task).
    fn account_forceidle(&mut self, cx: &mut Cx, c: usize) {
        let core = &self.cores[c];
        let delta = cx.now().saturating_sub(core.forceidle_start);
        if core.forceidle_count == 0 || delta == 0 {
            return;
        }
        cx.count_by("core_sched.forced_idle_ns", delta * core.forceidle_count as u64);
        let (count, occupation) = (core.forceidle_count as u64, core.occupation as u64);
        let share = if (count > 1 || occupation > 1) && occupation > 0 { delta * count / occupation } else { delta };
        for t in cx.core_threads(c) {
            let task = self.threads[t].pick.unwrap_or_else(|| cx.curr(t));
            if let Some(v) = task {
                self.forceidle_sum_ns[cx.dom_of(v)] += share;
            }
        }
        self.cores[c].forceidle_start = cx.now();
    }

    /// `pick_next_task` with core scheduling, past its fast path: the core-wide pick, made on
    /// `p` (whose previous task is back in its queue). Returns `p`'s pick; siblings whose pick
    /// changed are rescheduled to take theirs. Afterwards a forced-idle `p` should try
    /// [`CoreSched::steal`].
    pub(crate) fn pick(&mut self, cx: &mut Cx, q: &mut dyn FairQueues, p: PcpuId) -> Option<VcpuId> {
        let c = self.core_index(cx, p);
        let mut need_sync = self.cores[c].cookie != 0;
        self.cores[c].cookie = 0;
        let fi_before = self.cores[c].forceidle_count > 0;
        if fi_before {
            self.account_forceidle(cx, c);
            let core = &mut self.cores[c];
            core.forceidle_count = 0;
            core.occupation = 0;
            need_sync = true;
        }
        self.cores[c].task_seq += 1;
        if !need_sync {
            let next = q.pick_task(cx, p);
            if next.is_none_or(|v| self.cookie[v] == 0) {
                self.threads[p].pick = None;
                if next.is_some() {
                    self.fi_update(q, c, p, false);
                }
                return next;
            }
        }
        // Each thread's own best; the best of them, ties to `p` (`for_each_cpu_wrap` from it).
        let threads = cx.core_threads(p);
        let wrap: Vec<PcpuId> = (p..threads.end).chain(threads.start..p).collect();
        let mut max: Option<(VcpuId, PcpuId)> = None;
        let mut own = vec![None; threads.len()];
        for &t in &wrap {
            let pick = q.pick_task(cx, t);
            own[t - threads.start] = pick;
            if let Some(v) = pick {
                let better = match max {
                    None => true,
                    Some(m) => {
                        // se_fi_update of both, inside cfs_prio_less (CONFIG_FAIR_GROUP_SCHED,
                        // as distributions build it).
                        self.fi_update(q, c, m.1, fi_before);
                        self.fi_update(q, c, t, fi_before);
                        self.prio_less(q, m, (v, t))
                    }
                };
                if better {
                    max = Some((v, t));
                }
            }
        }
        let cookie = max.map_or(0, |(v, _)| self.cookie[v]);
        self.cores[c].cookie = cookie;
        let mut occupation = 0;
        for t in threads.clone() {
            let mut pick = own[t - threads.start];
            if pick.is_some_and(|v| self.cookie[v] != cookie) {
                pick = if cookie != 0 { self.find(q, t, cookie) } else { None };
            }
            own[t - threads.start] = pick;
            match pick {
                None if q.nr_running(t) > 0 => {
                    let core = &mut self.cores[c];
                    core.forceidle_count += 1;
                    if !fi_before {
                        core.forceidle_seq += 1;
                    }
                }
                None => {}
                Some(_) => occupation += 1,
            }
        }
        let core = &mut self.cores[c];
        let fi_now = core.forceidle_count > 0;
        if fi_now {
            core.forceidle_start = cx.now();
            core.occupation = occupation;
        }
        core.pick_seq = core.task_seq;
        let pick_seq = core.pick_seq;
        self.threads[p].sched_seq = pick_seq;
        for t in threads.clone() {
            let pick = own[t - threads.start];
            if let Some(v) = pick {
                if !(fi_before && fi_now) {
                    self.fi_update(q, c, t, fi_now);
                }
                self.occupation[v] = occupation;
            } else {
                self.threads[t].idle_occupation = occupation;
            }
            let forced = pick.is_none() && q.nr_running(t) > 0;
            if cx.tracing() && forced != self.threads[t].traced_forced_idle {
                self.threads[t].traced_forced_idle = forced;
                cx.trace_counter(FORCED_IDLE_TRACK, CounterOf::Pcpu(t), forced as i64);
            }
            // `p` takes its pick now; a sibling already running its pick needs nothing.
            if t == p || cx.curr(t) == pick {
                self.threads[t].pick = None;
            } else {
                self.threads[t].pick = Some(pick);
                cx.resched(t);
            }
        }
        own[p - threads.start]
    }

    /// `queue_core_balance` → `sched_core_balance`: `p` was just forced idle; the waiting task
    /// of the core's cookie it may take from another pCPU, nearest first (the core, the
    /// socket, the host: `for_each_domain`, each from `p + 1` on). `may_move` is the policy's
    /// affinity test. The caller moves the task to `p` and picks again.
    pub(crate) fn steal(
        &self,
        cx: &Cx,
        q: &dyn FairQueues,
        p: PcpuId,
        may_move: impl Fn(VcpuId) -> bool,
    ) -> Option<VcpuId> {
        let cookie = self.cores[self.core_index(cx, p)].cookie;
        if cookie == 0 || q.nr_running(p) == 0 {
            return None;
        }
        let n = cx.n_pcpus();
        let core = cx.core_threads(p);
        let domains: [&dyn Fn(PcpuId) -> bool; 3] =
            [&|i| core.contains(&i), &|i| cx.socket_of(i) == cx.socket_of(p), &|_| true];
        for in_domain in domains {
            for i in (1..n).map(|k| (p + k) % n).filter(|&i| in_domain(i)) {
                let src = &self.threads[i];
                let mut candidates = q.queued(i);
                candidates.retain(|&v| self.cookie[v] == cookie);
                candidates.sort_by_key(|&v| (q.vruntime(v), v));
                let found = candidates.into_iter().find(|&v| {
                    src.pick != Some(Some(v))
                        && cx.curr(i) != Some(v)
                        && may_move(v)
                        && self.occupation[v] <= self.threads[p].idle_occupation
                });
                if found.is_some() {
                    return found;
                }
            }
        }
        None
    }

    /// `sched_core_tick` and `task_tick_core`: `p`'s queue holds `nr_running` tasks and its
    /// running one has run `ran_ns` of its `slice_ns` since it was picked; alone on its queue,
    /// it yields the core once it used half while a sibling is forced idle.
    pub(crate) fn tick(&mut self, cx: &mut Cx, p: PcpuId, nr_running: usize, ran_ns: i64, slice_ns: i64) {
        if !self.on {
            return;
        }
        let c = self.core_index(cx, p);
        if self.cores[c].forceidle_count > 0 {
            self.account_forceidle(cx, c);
            if nr_running == 1 && ran_ns * MIN_NR_TASKS_DURING_FORCEIDLE > slice_ns {
                cx.count("core_sched.forced_idle_ticks");
                cx.resched(p);
            }
        }
    }

    /// Per VM: `core_forceidle_sum_s`, the time its vCPUs ran while a sibling was forced idle
    /// (each interval shared among the busy threads).
    pub(crate) fn vm_metrics(&self, d: DomId) -> Vec<(&'static str, f64)> {
        match self.forceidle_sum_ns.get(d) {
            Some(&ns) if self.on => vec![("core_forceidle_sum_s", ns as f64 / 1e9)],
            _ => Vec::new(),
        }
    }

    /// Invariant: no two threads of a core run tasks of different cookies.
    pub(crate) fn check(&self, cx: &Cx) -> Result<(), String> {
        if !self.on {
            return Ok(());
        }
        for p in 0..cx.n_pcpus() {
            for s in cx.core_threads(p).filter(|&s| s > p) {
                if let (Some(a), Some(b)) = (cx.curr(p), cx.curr(s)) {
                    if self.cookie[a] != self.cookie[b] && !cx.resched_pending(p) && !cx.resched_pending(s) {
                        return Err(format!(
                            "pCPUs {p} and {s} run cookies {} and {} together",
                            self.cookie[a], self.cookie[b]
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}
