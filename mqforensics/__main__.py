from mqforensics.cli import main

raise SystemExit(main())
