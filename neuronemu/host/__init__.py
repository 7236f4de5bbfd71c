"""What neuronemu asks of the host process: private cache folders, malloc and gc settings."""
