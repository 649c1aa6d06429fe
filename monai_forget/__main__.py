import sys

from monai_forget.cli import main

sys.exit(main())
