from bar.cli import main

raise SystemExit(main(resident=True))
