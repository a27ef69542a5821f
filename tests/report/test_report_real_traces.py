# tests/report/test_report_real_traces.py — gpumem-report's verdicts on traces recorded from real programs.
"""gpumem-report's verdicts on traces of real programs recorded on an H100 (tests/report/real/README.md):
the behaviour of real frameworks (PyTorch retrying a failed cudaMalloc, probing cuMemCreate with a
handle type that is not permitted, mapping 20 MiB chunks until the device is full, cuBLAS workspaces
kept for the process, gradients allocated on the autograd engine's threads) under test on any machine."""
import os
import unittest

from reportlib import ReportTestCase, report_json, run_report

REAL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "real")
MiB = 1 << 20


def trace(name):
    return os.path.join(REAL, name + ".jsonl.zst")


def user_lines(stack, script):
    return [f["line"] for f in stack if f.get("lang") == "python" and f.get("file", "").endswith(script)]


class RealTraces(ReportTestCase):
    def test_clean_training_passes_the_gates(self):
        r = report_json(trace("clean"), "--fail-on-leak=1MiB", "--fail-on-growth")
        self.assertEqual(r["leaks"], [])
        self.assertEqual(r["growth"], [])
        libraries = {h["library"] for h in r["held_at_exit"] if h["reason"] == "library"}
        self.assertIn("cuBLAS", libraries)
        cublas = sum(h["bytes"] for h in r["held_at_exit"] if h.get("library") == "cuBLAS")
        self.assertGreaterEqual(cublas, 128 * MiB)  # two handles' 64 MiB workspaces
        alive = [h for h in r["held_at_exit"] if h["reason"] == "alive_at_exit"]
        self.assertTrue(alive)  # the model's parameters and gradients, still referenced at exit
        # No byte without a stack: gradients are charged to the backward() call that made them.
        for h in alive:
            self.assertTrue(h["stack"], h)
        grads = [h for h in alive if h["stack"][0]["function"].startswith("[autograd engine thread")]
        self.assertTrue(grads)
        self.assertIn(12, user_lines(grads[0]["stack"], "clean_train.py"))  # loss.backward()
        # Without the library rules the cuBLAS workspaces are leaks again; counting blocks alive at
        # exit fails the gate: both switches work.
        run_report(trace("clean"), "--fail-on-leak=1MiB", "--no-default-suppressions", check_rc=1)
        run_report(trace("clean"), "--fail-on-leak=1MiB", "--count-alive-at-exit", check_rc=1)

    def test_jax_handles_are_held_by_libraries(self):
        r = report_json(trace("jax"), "--fail-on-leak")
        self.assertEqual(r["leaks"], [])
        self.assertEqual({h["library"] for h in r["held_at_exit"]}, {"cuBLAS", "cuDNN"})

    def test_pytest_names_the_leaking_test_only(self):
        r = report_json(trace("pytest"))
        names = [s["name"] for s in r["scopes"]]
        self.assertEqual(len(names), 3, names)
        leaking = [s for s in r["scopes"] if s["leaked_bytes"] > MiB]
        self.assertEqual([s["name"] for s in leaking], ["tests/gpu/scenarios/leaky_suite.py::test_keeps_tensor"])
        self.assertEqual(leaking[0]["leaked_bytes"], 16 * MiB)
        self.assertEqual(user_lines(leaking[0]["leaks"][0]["stack"], "leaky_suite.py"), [14])
        proc = run_report(trace("pytest"), "--fail-on-leak=1MiB", check_rc=1)
        self.assertIn("leaky_suite.py::test_keeps_tensor leaked 16.0 MiB", proc.stderr)
        self.assertNotIn("test_linear_backward leaked", proc.stderr)
        self.assertNotIn("test_matmul leaked", proc.stderr)
        self.assertIn("LEAK tests/gpu/scenarios/leaky_suite.py::test_keeps_tensor", proc.stdout)

    def test_retried_cudamalloc_is_one_capacity_incident(self):
        r = report_json(trace("capacity"))
        (oom,) = r["ooms"]
        self.assertEqual([a["api"] for a in oom["attempts"]], ["cudaMalloc", "cudaMalloc", "torch.oom"])
        self.assertEqual(oom["verdict"], "capacity")
        self.assertEqual(oom["requested"], 4 << 30)
        self.assertEqual(r["summary"]["ooms"], 1)

    def test_each_failed_request_is_one_incident(self):
        # One incident per request (issue 19): no real trace's request is split, none merged.
        expected = {"capacity": 1, "capped": 1, "expandable": 1, "clean": 0, "jax": 0, "pytest": 0, "eval": 0,
                    "roles": 0}
        self.assertEqual({name: len(report_json(trace(name))["ooms"]) for name in expected}, expected)
        (capped,) = report_json(trace("capped"))["ooms"]
        self.assertEqual([a["api"] for a in capped["attempts"]], ["torch.oom"])  # the allocator alone refused

    def test_capped_allocator_is_an_allocator_limit(self):
        r = report_json(trace("capped"))
        (oom,) = r["ooms"]
        self.assertEqual(oom["verdict"], "allocator limit")
        self.assertGreater(oom["device_free"], 70 << 30)
        self.assertIn("set_per_process_memory_fraction", oom["advice"])

    def test_expandable_segments_growth_survives_the_oom_spike(self):
        r = report_json(trace("expandable"))
        (oom,) = r["ooms"]  # two cuMemCreate failures and torch.oom: one request
        self.assertEqual([a["api"] for a in oom["attempts"]], ["cuMemCreate", "cuMemCreate", "torch.oom"])
        self.assertEqual(oom["verdict"], "capacity")  # 200 GiB: larger than the device
        # The fabric-handle probe is a failed call, not an OOM.
        self.assertEqual([(c["api"], c["error"]) for c in r["failed_calls"]],
                         [("cuMemCreate", "CUDA_ERROR_NOT_PERMITTED")])
        growth = [g for g in r["growth"] if g["level"] == "block"]
        lines = sorted(l for g in growth for l in user_lines(g["stack"], "expandable_growth_oom.py"))
        self.assertEqual(lines, [12, 13])  # the kept input and output of every step
        # The 78 GiB transient peak of mapped chunks is not growth of its own.
        self.assertEqual([g for g in r["growth"] if g["level"] != "block"], [])
        run_report(trace("expandable"), "--fail-on-growth", check_rc=1)

    def test_eval_accumulation_is_growth_with_the_no_grad_advice(self):
        r = report_json(trace("eval"))
        planted = [g for g in r["growth"] if 10 in user_lines(g["stack"], "eval_without_no_grad.py")]
        self.assertEqual(len(planted), 1)
        self.assertIn("torch.no_grad()", planted[0]["advice"])

    def test_transformer_peak_is_split_by_role(self):
        r = report_json(trace("roles"))
        (peak,) = r["peaks"]
        roles = peak["roles"]
        for role in ("parameters", "gradients", "optimizer state", "activations", "library workspaces"):
            self.assertGreater(roles[role], 0, role)
        # AdamW keeps two moments per parameter.
        self.assertAlmostEqual(roles["optimizer state"] / roles["parameters"], 2.0, delta=0.1)
        self.assertGreater(roles["activations"], roles["parameters"])
        # The split covers the reserved memory at that moment.
        self.assertLessEqual(sum(roles.values()), peak["bytes"])
        self.assertIn("activations hold", peak["advice"])


if __name__ == "__main__":
    unittest.main()
