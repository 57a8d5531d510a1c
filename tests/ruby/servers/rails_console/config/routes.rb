# frozen_string_literal: true

Rails.application.routes.draw do
  get "login" => "sessions#new"
  post "login" => "sessions#create"
  get "health" => "pages#show"
  # staff only, as Sidekiq's web UI is mounted (the console checks again)
  constraints(->(request) { Staff.staff?(request.session["user"]) }) do
    mount Ratekeeper::Web, at: "/ratekeeper"
  end
  root "pages#show"
  get "api/*path" => "pages#show"
end
