from vibesys.cli import main

main()
