"""The quick-start scripts: help comes before any set-up (issue 18)."""
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def run_sim_scenario(scenario: str, runs: dict, base: list) -> None:
    """inca-sim on scenarios/cais/<scenario>.yaml once per run: name -> its
    own --set arguments after `base`."""
    build = os.environ.get("INCA_BUILD_DIR", os.path.join(ROOT, "build", "release"))
    sim = os.path.join(build, "bin", "inca-sim")
    for name, extra in runs.items():
        out = subprocess.run([sim, os.path.join(ROOT, "scenarios", "cais", scenario + ".yaml"),
                              "--set", "name=" + name] + base + extra,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr


def assert_one_line_error_without_runs(script: str, tmp_path) -> None:
    """`script --dir` a directory without inca-sim's runs: exit 2, one line."""
    bad = subprocess.run(["/usr/bin/python3", script, "--dir", str(tmp_path / "none")],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1


def test_run_sh_help_prints_usage_without_building(tmp_path):
    # run.sh alone in a tree without setup.sh: any attempt to build fails.
    (tmp_path / "scripts").mkdir()
    shutil.copy(os.path.join(ROOT, "scripts", "run.sh"), tmp_path / "scripts" / "run.sh")
    for flag in ("--help", "-h"):
        out = subprocess.run(["bash", str(tmp_path / "scripts" / "run.sh"), "--ranks", "8", flag],
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith("usage: scripts/run.sh")
        assert "cais-perf" in out.stdout
        assert not (tmp_path / "build").exists()


def test_a_hung_rank_is_reported_with_its_python_stack(tmp_path):
    # run_ranks aborts ranks past their deadline; the report shows where each one was stuck.
    import pytest
    import cais.launch as launch
    script = tmp_path / "stuck.py"
    script.write_text("import os, threading\n"
                      "def wait_for_peer():\n"
                      "    threading.Event().wait()  # never set: hung\n"
                      "if os.environ['RANK'] == '1':\n"
                      "    wait_for_peer()\n"
                      "print('{}')\n")
    with pytest.raises(RuntimeError) as err:
        launch.run_ranks([str(script)], 2, timeout_s=3)
    report = str(err.value)
    assert "--- rank 0 rc=0" in report
    rank1 = report.split("--- rank 1")[1]
    assert "timed out after 3 s" in rank1 and "in wait_for_peer" in rank1


def test_generated_doc_sections_are_replaced_in_place_and_others_kept(tmp_path):
    import sys
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    import doc_sections
    doc = tmp_path / "EVAL.md"
    doc.write_text("# head\n\n<!-- drl:begin -->\nold drl\n<!-- drl:end -->\n")
    doc_sections.replace_section(str(doc), "cais-testbed", "first")
    doc_sections.replace_section(str(doc), "cais-testbed", "second")
    text = doc.read_text()
    assert text.count("cais-testbed:begin") == 1 and "second" in text and "first" not in text
    assert set(doc_sections.marked(text)) == {"drl", "cais-testbed"}
    assert "old drl" in doc_sections.marked(text)["drl"]


def test_cais_sim_vs_testbed_sets_the_simulator_beside_a_measured_run(tmp_path):
    # A measured run of two sizes (the 256 KiB one is below the tbf burst and
    # left out); the simulator runs the 1 MiB one on the same star.
    import json
    measured = {"sweep4": {"testbed": {"hosts": 4, "rate": "1gbit", "mtu": 9000},
                           "rows": [{"bytes": 262144, "gloo_us": 4000.0, "switch_us": 2500.0},
                                    {"bytes": 1048576, "gloo_us": 13000.0,
                                     "switch_us": 9000.0}]}}
    (tmp_path / "testbed.json").write_text(json.dumps(measured))
    # A tree benchmark's scenario (2 racks x 2 hosts, 250 Mbit/s hosts,
    # 500 Mbit/s uplinks), simulated on inca-sim's fabric of the same racks.
    tree_rows = [{"bytes": 1048576, "gloo": {"time_us": 70000.0}, "tree": {"time_us": 40000.0}}]
    tree = {"scenarios": {"ah": {"result": {"testbed": {
        "racks": 2, "hosts_per_rack": 2, "rate": "250mbit", "uplink_rate": "500mbit"},
        "rows": tree_rows}}}}
    (tmp_path / "tree.json").write_text(json.dumps(tree))
    doc = tmp_path / "EVAL.md"
    doc.write_text("# evaluation\n")
    build = os.environ.get("INCA_BUILD_DIR", os.path.join(ROOT, "build", "release"))
    out = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "scripts",
                                                          "cais_sim_vs_testbed.py"),
                          "--testbed", str(tmp_path / "testbed.json"), "--doc", str(doc),
                          "--tree-testbed", str(tmp_path / "tree.json"),
                          "--sim", os.path.join(build, "bin", "inca-sim")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    text = doc.read_text()
    two = [l for l in text.split("### Two tiers")[1].splitlines() if l.startswith("| ah |")]
    assert len(two) == 1, text
    cells = [c.strip() for c in two[0].strip("|").split("|")]
    # 1 MiB over 250 Mbit/s host links: the tree about 34 ms (the tensor once
    # each way), the ring 1.5 times that (2(n-1)/n of it).
    assert 33.0 < float(cells[6]) < 36.0 and 49.0 < float(cells[3]) < 53.0, two[0]
    assert abs(float(cells[7]) - float(cells[6]) / 40.0) < 0.01
    assert text.startswith("# evaluation\n") and "### 4 x 1 Gbit/s" in text
    rows = [l for l in text.splitlines() if l.startswith("| 1 MiB")]
    assert len(rows) == 1 and "256" not in text.split("### 4 x 1 Gbit/s")[1].split("Largest")[0]
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    # The simulated times are the links' bounds: 1 MiB on 4 x 1 Gbit/s is
    # about 12.7 ms for the ring and 8.5 ms for the switch.
    assert 12.0 < float(cells[2]) < 13.5 and 8.0 < float(cells[5]) < 9.0
    assert abs(float(cells[3]) - float(cells[2]) / 13.0) < 0.01
    bad = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "scripts",
                                                          "cais_sim_vs_testbed.py"),
                          "--testbed", str(tmp_path / "missing.json"), "--doc", str(doc)],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1


def test_cais_tp_evaluation_writes_the_four_runs_beside_the_write_up(tmp_path):
    # A small model (2 MiB all-reduces) at TP 4 and 8 on 100 Gbit/s, run
    # four ways as scripts/evaluate-cais.sh runs the real one.
    base = ["--set", "hidden=1024", "--set", "seq=1024", "--set", "layers=4", "--set", "tp=4,8",
            "--set", "link_gbps=100", "--set", "steps=200", "--set", "ar_samples=3",
            "--out", str(tmp_path)]
    run_sim_scenario("tp-gpt3", {
        "tp-gpt3-quiet": ["--set", "background_load=0"], "tp-gpt3": [],
        "tp-gpt3-stragglers": ["--set", "background_load=0", "--set", "straggler_prob=0.05"],
        "tp-gpt3-sp": ["--set", "background_load=0", "--set", "sequence_parallel=true"]}, base)
    doc = tmp_path / "EVAL.md"
    doc.write_text("# evaluation\n")
    script = os.path.join(ROOT, "scripts", "cais_tp_evaluation.py")
    out = subprocess.run(["/usr/bin/python3", script, "--dir", str(tmp_path), "--doc", str(doc),
                          "--plots", str(tmp_path / "plots")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    text = doc.read_text()
    assert text.startswith("# evaluation\n") and "<!-- cais-tp:begin -->" in text
    assert (tmp_path / "plots" / "cais-tp-step.png").stat().st_size > 1000
    for title in ("### A quiet network", "### Background traffic", "### Stragglers",
                  "### Sequence parallelism"):
        assert title in text
    # One row per TP degree in each run; on the quiet network inca's step is
    # shorter (2 MiB is bandwidth-bound at 100 Gbit/s).
    quiet = text.split("### A quiet network")[1].split("###")[0]
    rows = [l for l in quiet.splitlines() if l.startswith("| 4 ") or l.startswith("| 8 ")]
    assert len(rows) == 2
    for r in rows:
        assert r.split("|")[5].strip().startswith("\u2212"), r  # a minus sign
    assert "| step time, inca vs ring | −18 % |" in text
    # With sequence parallelism the ring is ahead: a plus sign.
    sp = text.split("### Sequence parallelism")[1].split("###")[0]
    rows = [l for l in sp.splitlines() if l.startswith("| 4 ") or l.startswith("| 8 ")]
    assert len(rows) == 2 and all(r.split("|")[5].strip().startswith("+") for r in rows), rows
    assert "Sequence parallelism takes the switch's gain away" in text
    assert_one_line_error_without_runs(script, tmp_path)


def test_cais_dp_evaluation_writes_both_fabrics_and_why(tmp_path):
    # A small model (64 MB of gradients, 3 buckets) at DP 8 and 16 on a
    # k = 4 fat-tree, full, 4:1 and with 16 micro-batches; at DP 8 with
    # other traffic and as two jobs (on switches advising windows and not,
    # and with 256 slots),
    # as scripts/evaluate-dp.sh runs the real one.
    base = ["--set", "params=32e6", "--set", "tp=1", "--set", "dp=8,16", "--set", "fat_tree_k=4",
            "--out", str(tmp_path)]
    run_sim_scenario("dp-llama2", {
        "dp-llama2-full": [],
        "dp-llama2-4to1": ["--set", "uplink_gbps=100"],
        "dp-llama2-acc16": ["--set", "accumulation=16"],
        "dp-llama2-background": ["--set", "dp=8", "--set", "background_load=0.1",
                                 "--set", "background_flow_bytes=256K"],
        "dp-llama2-jobs": ["--set", "dp=8", "--set", "jobs=2"],
        "dp-llama2-jobs-unadvised": ["--set", "dp=8", "--set", "jobs=2", "--set",
                                     "backends=inca", "--set", "switch_advise_window=false"],
        "dp-llama2-jobs-slots": ["--set", "dp=8", "--set", "jobs=2", "--set", "backends=inca",
                                 "--set", "switch_slots=256"]}, base)
    doc = tmp_path / "EVAL.md"
    doc.write_text("# evaluation\n")
    script = os.path.join(ROOT, "scripts", "cais_dp_evaluation.py")
    out = subprocess.run(["/usr/bin/python3", script, "--dir", str(tmp_path), "--doc", str(doc)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    text = doc.read_text()
    assert text.startswith("# evaluation\n") and "<!-- cais-dp:begin -->" in text
    for title in ("### Full bisection (links between switches 400 Gbit/s",
                  "### Oversubscribed 4:1 above the edge switches (links between switches 100",
                  "### Full bisection, 16 micro-batches a step",
                  "### Other traffic: 10 % of every downlink in 256 KiB flows (DP 8",
                  "### 2 jobs of DP 8 side by side (16 hosts",
                  "### Where it wins, where it does not, and why"):
        assert title in text, title
    # Three backends at each DP size in each run (two sizes in three, one
    # in two); the ring's row is 1.00x itself; inca unadvised beside.
    rows = [l for l in text.splitlines() if re.match(r"\| (8|16) \| (inca|tree|ring) \|", l)]
    assert len(rows) == 24, rows
    assert re.search(r"\| 8 \| inca, switches not advising windows \|", text)
    assert re.search(r"\| 8 \| inca, 256 slots a switch \|", text)
    assert "- **Each job at a core of its own" in text
    assert all(r.rstrip().endswith("| 1.00× |") for r in rows if "| ring |" in r)
    assert "Where in-network aggregation wins" in text and "Oversubscription" in text
    assert "Where it wins less." in text and "(DP 8, 16)" in text
    assert "Other traffic costs inca" in text and "- **Several jobs " in text
    assert_one_line_error_without_runs(script, tmp_path)


def test_sim_cbr_star_delivers_the_bottleneck_rate_and_drops_the_rest(tmp_path):
    # inca's side of the ns-3 comparison: 9 x 6 Gbit/s into 40 Gbit/s for
    # 50 ms. Every datagram is 9,030 bytes on the bottleneck (9,000 + UDP,
    # IPv4, PPP), so it delivers 40e9 * 0.05 / (9030 * 8) of them, about.
    import json
    build = os.environ.get("INCA_BUILD_DIR", os.path.join(ROOT, "build", "release"))
    out = subprocess.run([os.path.join(build, "bin", "sim-cbr-star"), "--duration-s", "0.05"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert r["offered"] == 9 * round(0.05 / 12e-6)
    assert r["delivered"] + r["dropped"] == r["offered"]
    assert abs(r["delivered"] - 40e9 * 0.05 / (9030 * 8)) < 0.002 * r["delivered"]
    # The comparison's writer, fed the same run as both simulators.
    with open(tmp_path / "ar.json", "w") as f:
        json.dump({"hosts": 16, "link_gbps": 400, "events": 1000,
                   "rows": [{"backend": "inca", "bytes": 200000000}]}, f)
    doc = tmp_path / "PERF.md"
    doc.write_text("# perf\n")
    w = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "scripts", "sim_vs_ns3.py"),
                        "--inca", out.stdout, "--ns3", out.stdout.replace("inca-sim", "ns-3.37"),
                        "--allreduce", str(tmp_path / "ar.json"),
                        "--allreduce-log", "1000 events in 0.01 s", "--duration-s", "0.05",
                        "--doc", str(doc), "--json", str(tmp_path / "out.json")],
                       capture_output=True, text=True, timeout=60)
    assert w.returncode == 0, w.stderr
    text = doc.read_text()
    assert "Delivered packets differ by 0.000 %" in text and "| ns-3.37 |" in text
    assert "0.1 million events per second" in text
    bad = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "scripts", "sim_vs_ns3.py"),
                          "--inca", "{}", "--ns3", "{}", "--allreduce", "none",
                          "--allreduce-log", "", "--duration-s", "1"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1


def test_olaf_load_sweep_writes_every_load_both_loops_and_the_age_split(tmp_path):
    # The sweep of scripts/evaluate-olaf.sh, one seed of 1.5 simulated seconds.
    build = os.environ.get("INCA_BUILD_DIR", os.path.join(ROOT, "build", "release"))
    sim = os.path.join(build, "bin", "inca-sim")
    short = ["--set", "duration_s=1.5", "--set", "warmup_s=0.5", "--out", str(tmp_path)]
    for scen in ("a-star", "b-hetero", "c-tree"):
        for policy in ("fifo", "olaf"):
            for loop in ("open", "closed"):
                name = f"load-{scen.split('-')[0]}-{policy}-{loop}-s1"
                out = subprocess.run(
                    [sim, os.path.join(ROOT, "scenarios", "olaf", scen + ".yaml"),
                     "--set", "policy=" + policy, "--set", "aligned_clusters=false",
                     "--set", "models=true", "--set", f"closed_loop={str(loop == 'closed').lower()}",
                     "--set", "name=" + name, "--sweep", "load=0.5,1,1.5,2.26,3"] + short,
                    capture_output=True, text=True, timeout=120)
                assert out.returncode == 0, out.stderr
    for policy in ("fifo", "olaf"):
        out = subprocess.run([sim, os.path.join(ROOT, "scenarios", "olaf", "a-star.yaml"),
                              "--set", "policy=" + policy, "--set", "egress_gbps=20",
                              "--set", f"name=sweep-{policy}-s1-20"] + short,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
    (tmp_path / "eval").mkdir()
    doc = tmp_path / "EVALUATION.md"
    doc.write_text("# evaluation\n")
    out = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "scripts", "olaf_load_sweep.py"),
                          str(tmp_path), str(tmp_path), "1", "1"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    text = doc.read_text()
    assert text.startswith("# evaluation\n") and "<!-- olaf-load:begin -->" in text
    assert (tmp_path / "eval" / "olaf-load-aom.png").stat().st_size > 1000
    for loop in ("open", "closed"):
        table = text.split(f"depth 8, {loop} loop")[1].split("###")[0]
        rows = [l for l in table.splitlines() if l.startswith("| ") and "(" in l.split("|")[1]][1:]
        assert [r.split("|")[1].split()[0] for r in rows] == ["0.5", "1", "1.5", "2.26", "3",
                                                               "paper"]
    # The age split adds up to the measured age in every row.
    split = text.split("### Where the age comes from")[1].split("###")[0]
    rows = [l.split("|") for l in split.splitlines()
            if l.startswith("| ") and l.split("|")[2].strip() in ("FIFO", "OLAF")]
    assert len(rows) == 10
    for r in rows:
        assert abs(float(r[6]) - float(r[7])) <= 0.1 + 0.01 * float(r[7]), r


def test_drl_at_rho_scales_the_egress_to_the_measured_offered_load(tmp_path):
    """scripts/drl_at_rho.py: the egress is the workers' measured rate / ρ,
    so each run's measured ρ is about the one asked for, and FIFO loses
    about 1 - 1/ρ of the updates (a tail-drop queue at a saturated link)."""
    doc = tmp_path / "EVAL.md"
    doc.write_text("# x\n")
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "drl_at_rho.py"),
                        "--rho", "2", "--seeds", "1", "--duration", "20", "--probe-duration", "10",
                        "--out", str(tmp_path / "out"), "--doc", str(doc)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    text = doc.read_text()
    assert "<!-- drl-rho:begin -->" in text and "## Training at the load sweep's ρ = 2.00" in text
    rho = [float(x.split(" ± ")[0]) for x in re.search(
        r"\| ρ measured[^|]*\| ([^|]+) \| ([^|]+) \|", text).groups()]
    assert all(1.7 < x < 2.3 for x in rho), rho
    fifo_loss = float(re.search(r"\| update loss[^|]*\| ([0-9.]+) ±", text).group(1))
    assert 35 < fifo_loss < 65, fifo_loss
