"""Accuracy of a finished task run under each answer rule, re-derived from its stored files
(the same as `seed-tot report RUN`):

    python scripts/quality_report.py runs/quality-gsm8k
"""

import sys

from seed_tot.cli import main

if __name__ == "__main__":
    main(["report", *sys.argv[1:]])
