"""Compare engines on the same GSM8K problems: the harness behind `seed-tot bench --peers`
(seed_tot/cli/bench_peers.py), kept as a script for the commands stored with earlier results.

    python scripts/engine_peers.py --limit 10 --systems a,b,c --out runs/engine-peers
"""

from seed_tot.cli.bench_peers import main

if __name__ == "__main__":
    main()
