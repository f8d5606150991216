from seed_tot.cli import main

main()
