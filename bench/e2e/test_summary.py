"""Checks compare.py's multi-round summary (time to target, dense quality, paired standings)
on rounds whose curves are known, through its --summarize command line."""

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare  # noqa: E402


def row(run, curve, target=0.96, step_ms=50.0, sent=1.0):
    reached = next(((t, e) for e, t, a in curve if a >= target), (None, None))
    return {"run": run, "rc": 0, "epochs": len(curve), "final_acc": curve[-1][2],
            "time_s": curve[-1][1], "time_to_target_s": reached[0],
            "reached_at": reached[1], "curve_unit": "epoch", "step_ms": step_ms,
            "bytes_sent": sent,
            "curve": [list(c) for c in curve]}


def write_round(directory, seed, rows):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "results.json"), "w") as f:
        json.dump({"rows": rows, "args": {"seed": seed}}, f)


def test_time_to_takes_the_first_epoch_at_or_above_the_target():
    r = row("x", [(1, 1.0, 0.90), (2, 2.0, 0.9694), (3, 3.0, 0.95), (4, 4.0, 0.97)])
    assert compare.time_to(r, 0.9694) == (2.0, 2)
    assert compare.time_to(r, 0.97) == (4.0, 4)
    assert compare.time_to(r, 0.99) == (None, None)
    assert compare.time_to({"run": "old"}, 0.5) == (None, None)  # rounds without curves


def test_paired_counts_a_miss_as_behind():
    assert compare.paired(1.0, 2.0) == "ahead"
    assert compare.paired(2.0, 1.0) == "behind"
    assert compare.paired(1.0, None) == "ahead"
    assert compare.paired(None, 1.0) == "behind"
    assert compare.paired(1.5, 1.5) == "tie"
    assert compare.paired(None, None) == "neither"


def test_summary_of_two_seeds(tmp_path):
    # Seed 3: dense ends at 0.98 (dense quality 0.975); GraVAC reaches 0.96 at 5 s and 0.975
    # at 6 s, static10 at 6 s and 8 s. Seed 4: dense ends at 0.97 (quality 0.965); GraVAC never
    # reaches 0.96, static10 does at 7 s and reaches 0.965 at 9 s.
    write_round(tmp_path / "a", 3, [
        row("dense", [(1, 10.0, 0.95), (2, 20.0, 0.98)], sent=100.0),
        row("static10", [(1, 4.0, 0.90), (2, 6.0, 0.965), (3, 8.0, 0.976)], sent=10.0),
        row("gravac_geometric", [(1, 3.0, 0.91), (2, 5.0, 0.961), (3, 6.0, 0.975)], sent=8.0),
    ])
    write_round(tmp_path / "b", 4, [
        row("dense", [(1, 10.0, 0.95), (2, 20.0, 0.97)], sent=100.0),
        row("static10", [(1, 4.0, 0.90), (2, 7.0, 0.962), (3, 9.0, 0.966)], sent=12.0),
        row("gravac_geometric", [(1, 3.0, 0.91), (2, 5.0, 0.95), (3, 6.0, 0.955)], sent=6.0),
    ])
    out = tmp_path / "summary"
    proc = subprocess.run(
        [sys.executable, os.path.join(HERE, "compare.py"), "--summarize", str(tmp_path / "a"),
         str(tmp_path / "b"), "--out_dir", str(out), "--target", "0.96",
         "--runs", "dense,static10,gravac_geometric,static100"],
        capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    with open(out / "summary.json") as f:
        summary = json.load(f)
    assert [round(q, 4) for q in summary["dense_quality"]] == [0.975, 0.965]
    runs = {r["run"]: r for r in summary["runs"]}
    assert set(runs) == {"dense", "static10", "gravac_geometric"}  # static100 ran in no round
    g, s = runs["gravac_geometric"], runs["static10"]
    assert g["seeds"] == [3, 4]
    assert g["time_to_target_s"] == [5.0, None] and g["reached"] == 1
    assert g["time_to_dense_quality_s"] == [6.0, None]
    assert s["time_to_target_s"] == [6.0, 7.0] and s["median_time_to_target_s"] == 6.5
    assert s["time_to_dense_quality_s"] == [8.0, 9.0]
    assert runs["dense"]["time_to_dense_quality_s"] == [20.0, 20.0]
    assert g["median_bytes_vs_dense"] == (0.08 + 0.06) / 2
    # final accuracy against dense: seed 3 -0.50 points (within), seed 4 -1.50 (not)
    assert [round(x, 2) for x in g["final_acc_vs_dense_pts"]] == [-0.5, -1.5]
    assert g["within_dense_margin"] == 1 and s["within_dense_margin"] == 2
    assert abs(g["mean_final_acc_vs_dense_pts"] + 1.0) < 1e-9
    assert abs(g["final_acc_vs_dense_stderr_pts"] - 0.5) < 1e-9  # stdev 0.707 over sqrt(2)
    standing = next(x for x in summary["standings"]
                    if x["gravac"] == "gravac_geometric" and x["against"] == "static10")
    assert standing["target"] == {"ahead": 1, "behind": 1, "tie": 0, "neither": 0}
    assert standing["dense_quality"] == {"ahead": 1, "behind": 1, "tie": 0, "neither": 0}
    # Time ratios over the rounds both reached: seed 3 only (5 / 6 and 6 / 8).
    assert standing["target_time_ratio"] == {"median": 5 / 6, "min": 5 / 6, "max": 5 / 6,
                                             "rounds": 1}
    assert standing["dense_quality_time_ratio"]["median"] == 0.75
    assert standing["target_sign_test_p"] == 0.75  # at least 1 of 2 tosses
    text = (out / "summary.md").read_text()
    assert "1 (seed 3), 2 (seed 4)" in text
    assert ("| gravac_geometric | static10 | 1 / 1 / 0 / 0 (0.750) | 0.83 (0.83-0.83, 1) | "
            "1 / 1 / 0 / 0 (0.750) | 0.75 (0.75-0.75, 1) |") in text
    assert "| -1.00 ± 0.50 | 1 of 2 |" in text


def test_sign_test_is_the_binomial_tail():
    assert compare.sign_test_p(3, 0) == 0.125
    assert compare.sign_test_p(0, 3) == 1.0
    assert compare.sign_test_p(2, 1) == 0.5
    assert abs(compare.sign_test_p(24, 11) - 0.020480) < 1e-6
    assert compare.sign_test_p(0, 0) is None


def test_mean_and_error_skip_missing_rounds():
    assert compare.mean_and_error([1.0, None, 3.0]) == (2.0, 1.0)
    assert compare.mean_and_error([None, 2.0]) == (None, None)


def test_time_ratios_take_the_rounds_both_reached():
    assert compare.time_ratios([2.0, None, 3.0, 8.0], [4.0, 1.0, None, 4.0]) == {
        "median": 1.25, "min": 0.5, "max": 2.0, "rounds": 2}
    assert compare.time_ratios([None], [1.0]) is None


def test_a_single_seed_is_the_seed_its_round_trains_with(tmp_path, monkeypatch):
    # `compare.py --seeds 90` used to run seed 0 (--seed's default) and call it seed 0.
    trained = []

    def fake_round(args, names, env):
        trained.append(args.seed)
        write_round(args.out_dir, args.seed, [row("dense", [(1, 1.0, 0.9)])])
        return True

    monkeypatch.setattr(compare, "run_round", fake_round)
    args = argparse.Namespace(seeds="90", seed=0, repeat=1, out_dir=str(tmp_path), epochs=1,
                              target=0.96, link="1gbit", dense_margin=0.5)
    assert compare.run_rounds(args, ["dense"], {}) == 0
    assert trained == [90]
    assert compare.read_round(str(tmp_path))["seed"] == 90
    args = argparse.Namespace(seeds="7,8", seed=0, repeat=2, out_dir=str(tmp_path / "m"),
                              epochs=1, target=0.96, link="1gbit", dense_margin=0.5)
    assert compare.seed_plan(args) == [7, 8, 7, 8]
    assert compare.run_rounds(args, ["dense"], {}) == 0
    assert trained == [90, 7, 8, 7, 8]
    with open(tmp_path / "m" / "summary.json") as f:
        assert [r["seed"] for r in json.load(f)["rounds"]] == [7, 8, 7, 8]


def test_decision_lines_and_epochs_per_100_steps(tmp_path):
    # Controller lines as coordinator_stats.cc logs them: a gain still being measured is named.
    (tmp_path / "gravac_geometric.log").write_text(
        "[controller] I 12:00:00 gravac-controller coordinator_stats.cc:170] decision epoch 1 "
        "from step 10: theta 10 theta_c 10 phase searching (searching) gain_min 0.950 gain_c "
        "0.950\n"
        "[controller] I 12:00:01 gravac-controller coordinator_stats.cc:170] decision epoch 2 "
        "from step 23: theta 10 theta_c 20 phase searching (searching) gain_min 0.940 gain_c "
        "not measured yet\n"
        "[rank 0] decision epoch 9 from step 1: theta 5 theta_c 5 phase x gain_min 1 gain_c 1\n")
    (tmp_path / "gravac_geometric.jsonl").write_text(json.dumps({"epoch": 1, "step": 40}) + "\n")
    res = compare.parse_gravac_outputs(str(tmp_path), "gravac_geometric")
    assert [(d["decision_epoch"], d["step"], d["theta_c"], d["gain_c"])
            for d in res["decisions"]] == [(1, 10, 10.0, 0.95), (2, 23, 20.0, None)]
    assert compare.epochs_per_100_steps(res) == 5.0
    assert compare.epochs_per_100_steps({"records": [], "decisions": []}) is None


def test_epsilon_reaches_the_gravac_runs_and_the_paper_runs_keep_their_own():
    args = argparse.Namespace(epochs=3, seed=3, target=0.8, batch_size=16, example="fashion",
                              train_size=6400, test_size=1000, lr=0.02, min_elements=32768,
                              window=10, eval_steps=30, theta_max=1000, min_dwell=None,
                              min_relative_gain=0.5, epsilon=0.5, score_every=10)

    def flag(name, key):
        argv = compare.training_args(args, name)
        return [argv[i + 1] for i, a in enumerate(argv) if a == key]

    assert flag("gravac_geometric", "--epsilon") == ["0.5"]
    assert flag("gravac_geometric", "--min-relative-gain") == ["0.5"]
    assert flag("gravac_exponential_paper", "--epsilon") == ["0.75"]
    assert flag("gravac_exponential_paper", "--min-relative-gain") == ["0"]
    assert flag("static100", "--epsilon") == [] and flag("dense", "--epsilon") == []
    args.epsilon = None  # the controller's
    assert flag("gravac_geometric", "--epsilon") == []
    # Every run, DDP's peer included, is scored on the same schedule.
    assert all(flag(n, "--score-every") == ["10"] for n in ("dense", "gravac_geometric", "ddp"))
    args.score_every = 0
    assert flag("dense", "--score-every") == []


def test_controller_lines_keep_decisions_and_search_periods(tmp_path):
    (tmp_path / "gravac_exponential.log").write_text(
        "[controller] I 12:00:00 gravac-controller coordinator_decisions.cc:38] decision epoch 2 "
        "from step 30: theta 10 theta_c 100 phase searching (searching) gain_min 1.054 gain_c "
        "not measured yet\n"
        "[controller] I 12:00:05 gravac-controller coordinator_stats.cc:131] search period of "
        "theta_c 100 ended at step 59: gain_c 0.571-0.683\n"
        "[controller] I 12:00:06 gravac-controller main.cc:90] listening\n"
        "[node 0] I 12:00:07 gravacd engine.cc:10] decision epoch 2 (pushed)\n")
    compare.write_controller_lines(str(tmp_path), ["gravac_exponential", "gravac_geometric"])
    lines = (tmp_path / "controller_decisions.log").read_text().splitlines()
    assert lines[0] == "# gravac_exponential"
    assert len(lines) == 4 and lines[3] == "# gravac_geometric"  # no log: a header alone
    assert "decision epoch 2 from step 30" in lines[1]
    assert "search period of theta_c 100 ended at step 59" in lines[2]


def test_scores_make_the_curve_and_leave_the_scoring_out(tmp_path):
    # A run scored every 10 steps (--score_every): three epochs of 20 steps, each epoch's own
    # record (its time_s counts the scoring) and the scores (their train_time_s does not).
    lines = []
    for epoch in (1, 2, 3):
        for step, t, acc in [(epoch * 20 - 10, epoch * 4.0 - 2.0, 0.5 + 0.1 * epoch),
                             (epoch * 20, epoch * 4.0, 0.55 + 0.1 * epoch)]:
            lines.append({"kind": "score", "epoch": epoch, "step": step, "train_time_s": t,
                          "test_accuracy": acc})
        lines.append({"epoch": epoch, "step": epoch * 20, "time_s": epoch * 5.0,
                      "test_accuracy": 0.55 + 0.1 * epoch, "step_time_s": 0.25,
                      "bytes_sent": 100 * epoch, "bytes_dense": 1000 * epoch})
    (tmp_path / "dense.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    res = compare.parse_gravac_outputs(str(tmp_path), "dense")
    assert [r["epoch"] for r in res["records"]] == [1, 2, 3]
    assert [r["step"] for r in res["scores"]] == [10, 20, 30, 40, 50, 60]
    assert res["bytes_sent"] == 300.0  # from the last epoch record, not a score
    res.update(rc=0, wall_s=20.0, load_before=(1, 1, 1), load_after=(1, 1, 1))
    r = compare.summarize("dense", res, 0.7)
    # 0.7 is first reached by the score at step 30 (epoch 2's mid-epoch score), at 6.0 s of
    # training: the epoch records alone would say epoch 2 at 10.0 s.
    assert (r["time_to_target_s"], r["reached_at"], r["curve_unit"]) == (6.0, 30, "step")
    assert compare.reached_label(r) == "step 30"
    assert r["epochs"] == 3 and abs(r["final_acc"] - 0.85) < 1e-12
    assert r["time_s"] == 12.0 and r["step_ms"] == 200.0  # 12 s of training over 60 steps
    # Without scores: the per-epoch curve, as before.
    res["scores"] = []
    r = compare.summarize("dense", res, 0.7)
    assert (r["time_to_target_s"], r["reached_at"], r["curve_unit"]) == (10.0, 2, "epoch")
    assert r["time_s"] == 15.0 and r["step_ms"] == 250.0
    assert compare.reached_label(r) == "epoch 2"


def test_fashion_scoring_schedule():
    sys.path.insert(0, os.path.join(compare.EXAMPLES_DIR))
    import fashion_mnist
    due = [s for s in range(1, 61) if fashion_mnist.score_due(s, 20, 10)]
    assert due == [10, 30, 50]  # the epoch ends (20, 40, 60) are scored by the epoch itself
    assert not any(fashion_mnist.score_due(s, 20, 0) for s in range(1, 61))
    clock = fashion_mnist.ScoringClock()
    before = clock.training_s()
    assert clock.score(lambda: (__import__("time").sleep(0.2), 7)[1]) == 7
    assert clock.scoring_s >= 0.2
    assert clock.training_s() - before < 0.1  # the 0.2 s of scoring is not training time
