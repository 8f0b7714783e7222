from vibesys.cli.main import main

main()
