FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends gcc pkg-config libmariadb-dev && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt
COPY . .
# Static files are part of the image: collected (hashed, compressed) once at build time, served by WhiteNoise.
# collectstatic needs no database or secret, but the settings refuse to load without a SECRET_KEY.
ENV CPS_STATIC_ROOT=/app/static
RUN SECRET_KEY=collectstatic-build-only python manage.py collectstatic --noinput
