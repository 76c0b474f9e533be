from pyembed.cli import main

main()
