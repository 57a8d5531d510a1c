# frozen_string_literal: true

Rails.application.routes.draw do
  post "/login" => "pages#show"
  get "/api/items" => "pages#show"
  get "/assets/*path" => "pages#show"
  get "/*path" => "pages#show"
end
