from nmtbench.cli import main

raise SystemExit(main())
