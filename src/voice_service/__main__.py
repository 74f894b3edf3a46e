from voice_service.cli.commands import main

main()
