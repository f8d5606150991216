"""Accuracy of a finished task run under each answer rule, re-derived from its stored files
(the same command, options and output as `seed-tot report RUN [RUN...]`):

    python scripts/quality_report.py runs/quality-gsm8k
"""

from seed_tot.cli.report import report

if __name__ == "__main__":
    report()
