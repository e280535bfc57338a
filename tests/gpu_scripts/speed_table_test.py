#!/usr/bin/env python3
# speed_table_test.py — bench/gpu/make_speed_table.py's parser on a checked-in log holding the three
# programs' real line shapes (gpt2_gpu_bench, bench/gpu/torch_gpt2.py, llm.c's train_gpt2cu).
# Is not: a benchmark; the numbers in the fixture are the issue's, typed in.
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "gpu"))
import make_speed_table  # noqa: E402

FIXTURE = os.path.join(HERE, "..", "fixtures", "gpu_bench", "speed_logs.txt")


class SpeedTable(unittest.TestCase):
    def setUp(self):
        with open(FIXTURE) as f:
            self.rows = make_speed_table.parse(f.readlines())

    def test_one_row_per_mode_in_print_order_llmc_last(self):
        self.assertEqual([r["trainer"] for r in self.rows],
                         ["ours (gpt2_gpu_bench), probe off", "ours (gpt2_gpu_bench), probe on",
                          "PyTorch eager", "PyTorch compile", "llm.c train_gpt2cu"])

    def test_numbers_come_from_their_own_line(self):
        on = self.rows[1]
        self.assertEqual((on["ms"], on["tps"], on["mfu"]), (222.0, 73800.0, "6.000%"))
        compiled = self.rows[3]
        self.assertEqual((compiled["ms"], compiled["tps"], compiled["peak"]), (36.0, 456000.0, 16.1))

    def test_our_peak_memory_line_applies_to_both_probe_rows(self):
        self.assertEqual([self.rows[0]["peak"], self.rows[1]["peak"]], [8.85, 8.85])

    def test_llmc_row_is_its_last_step_not_the_warm_up(self):
        self.assertEqual((self.rows[4]["ms"], self.rows[4]["tps"], self.rows[4]["mfu"]), (50.6, 324000.0, "26.3%"))

    def test_table_has_a_header_and_a_line_per_row(self):
        text = make_speed_table.table(self.rows).splitlines()
        self.assertEqual(len(text), 2 + len(self.rows))
        self.assertIn("| PyTorch compile | 36.0 | 456.0K | 37.00% | 16.10 GiB |", text)

    def test_nothing_known_gives_no_rows(self):
        self.assertEqual(make_speed_table.parse(["hello\n", "  probe off: 1 tokens/s 2 ms/step MFU 3%\n"]), [])


if __name__ == "__main__":
    unittest.main()
