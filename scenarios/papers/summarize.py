"""Tables of issue 3's closing note: seed 004 LU (solo/dual CON) and seed 000 Experiment I,
20 seeds each, every policy. Run from the repository root after `pip install .`:

    python scenarios/papers/summarize.py
"""
import statistics as st, sys, time
import vsched
def vmv(run, name, key):
    return next(v for v in run["vms"] if v["name"] == name)[key]
def ms(xs):
    return f"{st.mean(xs):.2f} ± {st.stdev(xs):.2f}"
t0 = time.time()
print("## seed 004 LU (20 seeds)")
for cfg in ["solo", "dual"]:
    text = open(f"scenarios/papers/seed004/lu-{cfg}-con.toml").read()
    for pol in ["credit", "cs", "cds", "pcs", "bcs"]:
        r = vsched.run(text, policy=pol, reps=20, seed=1)
        runs = r["runs"]
        names = ["lu1"] + (["lu2"] if cfg == "dual" else [])
        cells = []
        for n in names:
            xs = [vmv(x, n, "completion_s") for x in runs]
            cells.append(ms(xs) if None not in xs else f"unfinished in {sum(x is None for x in xs)} runs")
        extra = ""
        if cfg == "dual":
            d = [abs(vmv(x,"lu1","completion_s")-vmv(x,"lu2","completion_s"))/max(vmv(x,"lu1","completion_s"),vmv(x,"lu2","completion_s")) for x in runs]
            extra = f" | diff {100*st.mean(d):.1f}%"
        lps = [x["host"]["co_launches_per_s"] for x in runs]
        sk = [vmv(x, "lu1", "costart_skew_us_p50") or 0 for x in runs]
        fr = [x["host"]["frag_idle_s"] for x in runs]
        print(f"{cfg} | {pol} | " + " | ".join(cells) + f"{extra} | launches/s {ms(lps)} | skew p50 us {st.mean(sk):.0f} | frag s {st.mean(fr):.2f}", flush=True)
print("## seed 000 Exp I (20 seeds)")
for n in [2000, 3000, 4000]:
    text = open(f"scenarios/papers/seed000/exp1-{n}.toml").read()
    base = None
    for pol in ["credit", "cosched", "vds"]:
        r = vsched.run(text, policy=pol, reps=20, seed=1)
        xs = [vmv(x, "bsp", "completion_s") for x in r["runs"]]
        if None in xs:
            print(n, pol, "unfinished", xs.count(None)); continue
        m, s = st.mean(xs), st.stdev(xs)
        if pol == "credit":
            base = (m, s); rel = ""
        else:
            rel = f" | mean {100*(m-base[0])/base[0]:+.1f}% | std {100*(s-base[1])/base[1]:+.1f}%"
        fr = st.mean(x["host"]["frag_idle_s"] for x in r["runs"])
        ut = st.mean(x["host"]["utilization"] for x in r["runs"])
        print(f"{n} | {pol} | {m:.2f} ± {s:.2f}{rel} | frag {fr:.1f} s | util {ut:.2f}", flush=True)
print("wall", round(time.time()-t0,1), "s")
