from voice_service.cli import main

main()
