"""What the tests, benchmarks and screenshots start besides the product: a throwaway
PostgreSQL cluster, S3 and Azure emulators, a local Prefect stack and a headless browser."""
