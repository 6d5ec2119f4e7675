from labd.cli.main import main

raise SystemExit(main())
