from bar.cli.main import main

raise SystemExit(main(resident=True))
